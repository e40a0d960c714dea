//! The dashboard's static files (`/pkg/…`: the wasm, its JS glue, the CSS, ECharts, the
//! YAML editor), compiled into the binary so `berth serve` needs no build tree at run time.
//!
//! `build.rs` points the embed at the site `make site` wrote; a binary built before that has
//! none and serves the files from `--site-root` instead ([`embedded`] says which).
//! `--site-root` / `BERTH_SITE_ROOT` always wins, so a developer can serve a fresh frontend
//! build without rebuilding the server.
//!
//! The build names each file by its content hash and lists the names in `pkg/manifest.json`
//! ([`FileNames`]); pages link those names, so a hashed file never changes and is sent with
//! `Cache-Control: immutable` for a year. Anything else (a site without a manifest) is
//! `no-cache` with a strong `ETag`: revalidated, `304 Not Modified` until it changes. A
//! `.br` or `.gz` beside a file (precompressed by the build) is sent to clients that accept
//! brotli or gzip, brotli first.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use app::ui::files::{FileNames, SplitLoads};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use rust_embed::Embed;
use sha2::{Digest, Sha256};

#[derive(Embed)]
#[folder = "$BERTH_EMBED_SITE"]
struct Embedded;

/// Whether this binary carries the dashboard's files.
pub fn embedded() -> bool {
    Embedded::get("pkg/manifest.json").is_some() || Embedded::get("pkg/berth.js").is_some()
}

/// Where the files are read from, and the hashed names of its build.
#[derive(Debug, Clone)]
pub struct Site {
    /// A site root on disk; none: the files inside the binary.
    dir: Option<PathBuf>,
    names: Arc<FileNames>,
    split: Option<Arc<SplitLoads>>,
}

impl Site {
    /// The files compiled into the binary.
    pub fn embedded() -> Self {
        Site::with_lists(None, |name| Embedded::get(name).map(|f| String::from_utf8_lossy(&f.data).into_owned()))
    }

    /// The files under `root` (its `pkg/` directory), as the site was when this is called.
    pub fn dir(root: PathBuf) -> Self {
        let at = root.clone();
        Site::with_lists(Some(root), move |name| std::fs::read_to_string(at.join(name)).ok())
    }

    /// The site at `dir`, with the build's lists of its files (`manifest.json`, `split.json`)
    /// as `read` gives them.
    fn with_lists(dir: Option<PathBuf>, read: impl Fn(&str) -> Option<String>) -> Self {
        let names = read("pkg/manifest.json").map(|j| FileNames::from_manifest(&j)).unwrap_or_default();
        let split = read("pkg/split.json").and_then(|j| SplitLoads::from_json(&j)).map(Arc::new);
        Site { dir, names: Arc::new(names), split }
    }

    /// The names pages link the files by.
    pub fn names(&self) -> FileNames {
        self.names.as_ref().clone()
    }

    /// What each page group's code needs; none for a site built without splitting.
    pub fn split(&self) -> Option<Arc<SplitLoads>> {
        self.split.clone()
    }

    /// `pkg/…` relative to the site root; none for a path that leaves `pkg/`.
    async fn read(&self, path: &str) -> Option<Cow<'static, [u8]>> {
        if path.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
            return None;
        }
        match &self.dir {
            None => Embedded::get(path).map(|f| f.data),
            Some(root) => tokio::fs::read(root.join(path)).await.ok().map(Cow::Owned),
        }
    }
}

/// `GET /pkg/{*file}` from `site`.
pub fn routes(site: Site) -> Router {
    Router::new().route("/pkg/{*file}", get(serve)).with_state(site)
}

async fn serve(State(site): State<Site>, Path(file): Path<String>, headers: HeaderMap) -> Response {
    let path = format!("pkg/{file}");
    let Some(plain) = site.read(&path).await else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let mut encoded = None;
    for coding in [Coding::Brotli, Coding::Gzip] {
        if accepts(&headers, coding.token()) {
            if let Some(body) = site.read(&format!("{path}.{}", coding.suffix())).await {
                encoded = Some((coding, body));
                break;
            }
        }
    }
    // A hashed name already says what the content is; anything else is hashed here.
    let hashed = site.names.is_hashed(&file);
    let hash = if hashed { file.rsplit('/').next().unwrap_or(&file).to_string() } else { hex(&Sha256::digest(&plain)) };
    let etag = match &encoded {
        Some((coding, _)) => format!("\"{hash}-{}\"", coding.suffix()),
        None => format!("\"{hash}\""),
    };
    let mut out = HeaderMap::new();
    let cache = if hashed { "public, max-age=31536000, immutable" } else { "no-cache" };
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    out.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        out.insert(header::ETAG, v);
    }
    let unchanged = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    if unchanged {
        return (StatusCode::NOT_MODIFIED, out).into_response();
    }
    out.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type(&file)));
    let body = match encoded {
        Some((coding, body)) => {
            out.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
            body
        }
        None => plain,
    };
    (out, body.into_owned()).into_response()
}

/// The precompressed encodings the build writes, in the order they are preferred.
#[derive(Debug, Clone, Copy)]
enum Coding {
    Brotli,
    Gzip,
}

impl Coding {
    /// Its name in `Accept-Encoding` and `Content-Encoding`.
    fn token(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Gzip => "gzip",
        }
    }

    /// The file name suffix of its precompressed copy.
    fn suffix(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Gzip => "gz",
        }
    }
}

fn content_type(file: &str) -> &'static str {
    match file.rsplit('.').next().unwrap_or("") {
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "html" => "text/html; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        _ => "application/octet-stream",
    }
}

/// `Accept-Encoding` names `coding` (or `*`) with a non-zero weight.
fn accepts(headers: &HeaderMap, coding: &str) -> bool {
    headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|item| {
        let mut parts = item.split(';').map(str::trim);
        let name = parts.next().unwrap_or("");
        let zero = parts.any(|p| p.strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()) == Some(0.0));
        (name.eq_ignore_ascii_case(coding) || name == "*") && !zero
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(v: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(v));
        h
    }

    #[test]
    fn an_encoding_is_accepted_unless_refused() {
        assert!(accepts(&with("gzip, deflate, br"), "gzip"));
        assert!(accepts(&with("gzip, deflate, br"), "br"));
        assert!(accepts(&with("br;q=1.0, gzip;q=0.8"), "gzip"));
        assert!(accepts(&with("*"), "br"));
        assert!(!accepts(&with("gzip;q=0"), "gzip"));
        assert!(!accepts(&with("br;q=0, gzip"), "br"));
        assert!(!accepts(&with("br, deflate"), "gzip"));
        assert!(!accepts(&HeaderMap::new(), "gzip"));
    }

    #[test]
    fn content_types_by_extension() {
        assert_eq!(content_type("berth.0123.wasm"), "application/wasm");
        assert_eq!(content_type("snippets/x/inline0.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("manifest.json"), "application/json");
    }
}
