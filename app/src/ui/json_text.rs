//! The server functions' output encoding: JSON, as `server_fn`'s own `Json`, but read with
//! `serde_json::from_str`. A page's resources read the data the server rendered into the
//! page with `from_str` too (Leptos' JSON codec), and `from_str` and `from_slice` are two
//! instances of every `Deserialize` impl: with one reader, each type's JSON decoding is in
//! the wasm once instead of twice.

use leptos::server_fn::codec::Post;
use leptos::server_fn::{Bytes, ContentType, Decodes, Encodes, Format, FormatType};
use serde::{de::DeserializeOwned, Serialize};

/// JSON, decoded from text.
pub struct JsonTextEncoding;

impl ContentType for JsonTextEncoding {
    const CONTENT_TYPE: &'static str = "application/json";
}

impl FormatType for JsonTextEncoding {
    const FORMAT_TYPE: Format = Format::Text;
}

impl<T: Serialize> Encodes<T> for JsonTextEncoding {
    type Error = serde_json::Error;

    fn encode(output: &T) -> Result<Bytes, Self::Error> {
        serde_json::to_vec(output).map(Bytes::from)
    }
}

impl<T: DeserializeOwned> Decodes<T> for JsonTextEncoding {
    type Error = serde_json::Error;

    fn decode(bytes: Bytes) -> Result<T, Self::Error> {
        let text = std::str::from_utf8(&bytes).map_err(serde::de::Error::custom)?;
        serde_json::from_str(text)
    }
}

/// A server function's result as JSON in the body of a `POST` response, read as text.
pub type JsonText = Post<JsonTextEncoding>;
