//! The dashboard's static files (`/pkg/…`: the wasm, its JS glue, the CSS, ECharts),
//! compiled into the binary so `berth serve` needs no build tree at run time.
//!
//! `build.rs` points the embed at the site `make site` (or `make release`) wrote; a binary
//! built before that has none and serves the files from `--site-root` instead
//! ([`embedded`] says which). `--site-root` / `BERTH_SITE_ROOT` always wins, so a developer
//! can serve a fresh frontend build without rebuilding the server.
//!
//! A `.gz` next to a file (the Makefile writes them) is sent to clients that accept gzip.
//! The names carry no content hash, so responses say `no-cache` with a strong `ETag`: a
//! browser revalidates each load and gets `304 Not Modified` until the binary changes.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rust_embed::Embed;

#[derive(Embed)]
#[folder = "$BERTH_EMBED_SITE"]
struct Site;

/// Whether this binary carries the dashboard's files.
pub fn embedded() -> bool {
    Site::get("pkg/berth.js").is_some()
}

/// `GET /pkg/{*file}` from the embedded site.
pub fn routes() -> Router {
    Router::new().route("/pkg/{*file}", get(serve))
}

async fn serve(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let path = format!("pkg/{file}");
    let Some(plain) = Site::get(&path) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let gzip = accepts_gzip(&headers).then(|| Site::get(&format!("{path}.gz"))).flatten();
    let hash = hex(&plain.metadata.sha256_hash());
    let (body, etag) = match gzip {
        Some(gz) => (gz.data, format!("\"{hash}-gz\"")),
        None => (plain.data, format!("\"{hash}\"")),
    };
    let mut out = HeaderMap::new();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        out.insert(header::ETAG, v);
    }
    let unchanged = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    if unchanged {
        return (StatusCode::NOT_MODIFIED, out).into_response();
    }
    if let Ok(v) = HeaderValue::from_str(plain.metadata.mimetype()) {
        out.insert(header::CONTENT_TYPE, v);
    }
    if etag.ends_with("-gz\"") {
        out.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    (out, body.into_owned()).into_response()
}

/// `Accept-Encoding` names gzip with a non-zero weight.
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let zero = parts.any(|p| p.strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()) == Some(0.0));
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !zero
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_accepted_unless_refused() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(v));
            accepts_gzip(&h)
        };
        assert!(with("gzip, deflate, br"));
        assert!(with("br;q=1.0, gzip;q=0.8"));
        assert!(with("*"));
        assert!(!with("gzip;q=0"));
        assert!(!with("br, deflate"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
