//! The CLI's HTTP client for the REST API: every call returns the decoded body or the
//! server's error, so the CLI can print the server's own message.

use app::api::{ApplyResponse, ConfigVersion, ErrorBody, VersionPage};
use app::config::diff::ConfigDiff;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::json;

/// A failed call: the server's error body, or why the server could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{}", .0.error.message)]
    Api(ErrorBody, StatusCode),
    #[error("cannot reach the Berth server at {url}: {source}")]
    Unreachable { url: String, source: reqwest::Error },
    #[error("unexpected response from the server ({status}): {body}")]
    Unexpected { status: StatusCode, body: String },
}

/// A client of one Berth server.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Client {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:3000`), authenticated with
    /// `token` (none: the server must run in anonymous mode).
    pub fn new(base: &str, token: Option<String>) -> Self {
        Client { base: base.trim_end_matches('/').to_string(), token, http: reqwest::Client::new() }
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => req.bearer_auth(token),
            None => req,
        }
    }

    pub(crate) async fn send<T: DeserializeOwned>(&self, req: RequestBuilder) -> Result<T, ClientError> {
        let resp = req.send().await.map_err(|source| ClientError::Unreachable { url: self.base.clone(), source })?;
        let status = resp.status();
        let body = resp.text().await.map_err(|source| ClientError::Unreachable { url: self.base.clone(), source })?;
        if status.is_success() {
            return serde_json::from_str(&body).map_err(|_| ClientError::Unexpected { status, body });
        }
        match serde_json::from_str::<ErrorBody>(&body) {
            Ok(err) => Err(ClientError::Api(err, status)),
            Err(_) => Err(ClientError::Unexpected { status, body }),
        }
    }

    /// Applies a config given as YAML or JSON text.
    pub async fn apply(&self, text: &str, message: Option<&str>, expected: Option<i64>) -> Result<ApplyResponse, ClientError> {
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(m) = message {
            query.push(("message", m.to_string()));
        }
        if let Some(v) = expected {
            query.push(("expected_active_version", v.to_string()));
        }
        let is_json = text.trim_start().starts_with('{');
        let content_type = if is_json { "application/json" } else { "application/yaml" };
        let req = self
            .request(Method::POST, "/api/v1/scheduler/config")
            .query(&query)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(text.to_string());
        self.send(req).await
    }

    /// Validates a config given as YAML or JSON text on the server, which adds the warnings
    /// that need its nodes.
    pub async fn validate(&self, text: &str) -> Result<app::config::Report, ClientError> {
        let is_json = text.trim_start().starts_with('{');
        let content_type = if is_json { "application/json" } else { "application/yaml" };
        let req = self
            .request(Method::POST, "/api/v1/scheduler/config/validate")
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(text.to_string());
        self.send(req).await
    }

    /// Replays the recorded `window` under the draft `text` (YAML or JSON) and the active config.
    pub async fn preview(&self, text: &str, window: &str) -> Result<app::preview::PreviewReport, ClientError> {
        let body = json!({ "config": text, "window": window });
        self.send(self.request(Method::POST, "/api/v1/scheduler/config/preview").json(&body)).await
    }

    /// Version `version`, or the active one.
    pub async fn get(&self, version: Option<i64>) -> Result<ConfigVersion, ClientError> {
        let mut req = self.request(Method::GET, "/api/v1/scheduler/config");
        if let Some(v) = version {
            req = req.query(&[("version", v)]);
        }
        self.send(req).await
    }

    /// One page of versions.
    pub async fn versions(&self, max_items: i64, cursor: Option<&str>) -> Result<VersionPage, ClientError> {
        let mut req = self.request(Method::GET, "/api/v1/scheduler/config/versions").query(&[("max_items", max_items)]);
        if let Some(c) = cursor {
            req = req.query(&[("cursor", c)]);
        }
        self.send(req).await
    }

    /// Diff from version `from` to version `to`.
    pub async fn diff(&self, from: i64, to: i64) -> Result<ConfigDiff, ClientError> {
        let req = self.request(Method::GET, "/api/v1/scheduler/config/diff").query(&[("from", from), ("to", to)]);
        self.send(req).await
    }

    /// Restores version `version` as a new version.
    pub async fn rollback(&self, version: i64, message: Option<&str>) -> Result<ApplyResponse, ClientError> {
        let req = self
            .request(Method::POST, "/api/v1/scheduler/config/rollback")
            .json(&json!({ "version": version, "message": message }));
        self.send(req).await
    }

    /// GET `path` with `query`, decoded.
    pub async fn get_json<T: DeserializeOwned>(&self, path: &str, query: &[(&str, String)]) -> Result<T, ClientError> {
        self.send(self.request(Method::GET, path).query(query)).await
    }

    /// POST `body` as JSON to `path`, decoded.
    pub async fn post_json<T: DeserializeOwned>(&self, path: &str, body: &impl serde::Serialize) -> Result<T, ClientError> {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    /// A job's log; with `follow`, `on_chunk` gets each piece as it arrives until the job ends.
    pub async fn logs(&self, id: &str, query: &[(&str, String)], mut on_chunk: impl FnMut(&[u8])) -> Result<(), ClientError> {
        let req = self.request(Method::GET, &format!("/api/v1/jobs/{}/logs", encode(id))).query(query);
        let mut resp = req.send().await.map_err(|source| ClientError::Unreachable { url: self.base.clone(), source })?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            return Err(match serde_json::from_str::<ErrorBody>(&body) {
                Ok(err) => ClientError::Api(err, status),
                Err(_) => ClientError::Unexpected { status, body },
            });
        }
        while let Some(chunk) = resp.chunk().await.map_err(|source| ClientError::Unreachable { url: self.base.clone(), source })? {
            on_chunk(&chunk);
        }
        Ok(())
    }
}

/// `s` safe inside a URL path segment.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
