//! Authentication at the edge, and the browser's safety belts.
//!
//! [`authenticate`] runs before every handler: it finds the caller from an
//! `Authorization: Bearer` token, the `cli_token` cookie (how the `anyscale` SDK and CLI send
//! their token), the dashboard's session cookie, or (in anonymous local mode) nobody, and puts
//! it in the request for handlers and server functions. What the caller may do is decided by
//! the services. It also refuses cross-site state changes (CSRF) and sets a strict
//! Content-Security-Policy with a fresh nonce for the dashboard's inline scripts.
//!
//! CSRF: a state-changing request riding on the session cookie must come from the dashboard
//! itself, which the browser says with `Sec-Fetch-Site: same-origin` or an `Origin` equal to
//! the server's host; without either it is refused. The cookie is also `SameSite=Strict`.
//! Bearer token callers are not exposed (browsers never attach that header on their own).
//! The `cli_token` cookie is an API token, not a session: the SDK sends neither `Origin` nor
//! `Sec-Fetch-Site`, so it passes; but a browser would attach a cookie on its own, so any
//! request carrying it that the browser marks as cross-site is refused.

use std::net::SocketAddr;

use app::auth::{NewToken, Via};
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, HOST, LOCATION, ORIGIN, RETRY_AFTER, SET_COOKIE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::body::{Params, RawBody};
use super::error::ApiError;
use crate::services::auth::{Caller, SESSION_COOKIE, SESSION_TTL};
use crate::state::AppState;

/// Routes nested under `/api/v1`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/whoami", get(whoami))
        .route("/tokens", get(list_tokens).post(create_token))
        .route("/tokens/{id}/revoke", post(revoke_token))
        .route("/audit", get(audit))
}

/// The dashboard's sign-in and sign-out form targets, at the root.
pub fn session_routes() -> Router<AppState> {
    Router::new()
        .route("/auth/signin", post(sign_in))
        .route("/auth/signout", post(sign_out))
}

/// The nonce of this request's Content-Security-Policy, for the dashboard's inline scripts.
#[derive(Debug, Clone)]
pub struct CspNonce(pub String);

/// Paths anyone may reach: health checks, static files, the sign-in page and form, and
/// runs' reports (which carry a token of their own).
fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics" | "/signin" | "/auth/signin" | "/auth/signout" | "/favicon.ico" | "/api/v1/openapi.json")
        || path.starts_with("/pkg/")
        || super::runs::is_report(path)
}

/// Paths answered with JSON (a 401 there is JSON, elsewhere a redirect to the sign-in page).
fn is_api(path: &str) -> bool {
    path.starts_with("/api/") || matches!(path, "/add_task" | "/change_task_priority" | "/cancel_task")
}

/// The middleware: finds the caller, refuses what must not pass, adds security headers.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let caller = match find_caller(&state, req.headers()).await {
        Ok(caller) => caller,
        Err(e) => return secure(refusal(&path, e), None),
    };
    let cross = cross_site(req.headers());
    if cross == Some(true) && cookie(req.headers(), CLI_TOKEN_COOKIE).is_some() && req.headers().get(AUTHORIZATION).is_none() {
        let e = ApiError::new(StatusCode::FORBIDDEN, "csrf", "cross-site request refused: the `cli_token` cookie is for API clients, not for pages of other sites");
        return secure(e.into_response(), None);
    }
    let changes_state = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if changes_state {
        let refused = match caller.as_ref().map(|c| c.via) {
            // A session must prove it comes from the dashboard.
            Some(Via::Session) => cross != Some(false),
            // Anonymous mode and the sign-in form: refuse what a browser says is cross-site
            // (curl and the CLI send neither header).
            Some(Via::Anonymous) | None => cross == Some(true),
            Some(Via::Token) => false,
        };
        if refused {
            let e = ApiError::new(StatusCode::FORBIDDEN, "csrf", "cross-site request refused: state changes must come from the Berth dashboard itself");
            return secure(e.into_response(), None);
        }
    }
    match caller {
        Some(caller) => {
            req.extensions_mut().insert(caller);
        }
        None if is_public(&path) => {}
        None if is_api(&path) || changes_state => {
            let e = match super::ray_api::is_ray_path(&path) {
                true => ApiError::unauthorized("no API token was sent"),
                false => ApiError::unauthorized("sign in, or send an API token as `Authorization: Bearer …` (or as the `cli_token` cookie)"),
            };
            return secure(refusal(&path, e), None);
        }
        None => {
            let target = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
            let to = format!("/signin?next={}", app::ui::urlencode(target));
            return secure(redirect(&to), None);
        }
    }
    let nonce = random_nonce();
    req.extensions_mut().insert(CspNonce(nonce.clone()));
    secure(next.run(req).await, Some(&nonce))
}

/// A refusal in the shape the path's clients read: Ray's API answers in plain text, saying
/// how Ray's client sends a token.
fn refusal(path: &str, e: ApiError) -> Response {
    if !super::ray_api::is_ray_path(path) {
        return e.into_response();
    }
    let how = "Send a Berth API token: RAY_JOB_HEADERS='{\"Authorization\": \"Bearer <token>\"}' for the ray CLI, \
               or JobSubmissionClient(address, headers={\"Authorization\": \"Bearer <token>\"})";
    let message = if e.status == StatusCode::UNAUTHORIZED { format!("Berth: {}. {how}", e.message) } else { e.message };
    super::ray_api::RayError(ApiError { message, ..e }).into_response()
}

/// The `anyscale` SDK's cookie: an API token, looked up like `Authorization: Bearer`.
pub const CLI_TOKEN_COOKIE: &str = "cli_token";

/// The caller the request's credentials name: the bearer token (Ray's proxies send it as
/// `X-Ray-Authorization`), else the `cli_token` cookie, else the session cookie. An invalid
/// token is an error, a stale session cookie is just no session.
async fn find_caller(state: &AppState, headers: &HeaderMap) -> Result<Option<Caller>, ApiError> {
    let internal = |e: sqlx::Error| {
        tracing::error!(error = %e, "auth store failure");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log")
    };
    let bearer = match headers.get(AUTHORIZATION).or_else(|| headers.get("x-ray-authorization")) {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
                .map(|t| t.trim().to_string())
                .ok_or_else(|| ApiError::unauthorized("Authorization: expected `Bearer <API token>`"))?,
        ),
        None => cookie(headers, CLI_TOKEN_COOKIE),
    };
    if let Some(token) = bearer {
        return match state.auth.by_token(&token).await.map_err(internal)? {
            Some(caller) => Ok(Some(caller)),
            None => Err(ApiError::unauthorized("the API token is not valid: unknown or revoked")),
        };
    }
    if let Some(session) = cookie(headers, SESSION_COOKIE) {
        if let Some(caller) = state.auth.by_session(&session).await.map_err(internal)? {
            return Ok(Some(caller));
        }
    }
    Ok(state.auth.anonymous.then(Caller::anonymous))
}

/// `Some(true)` when the browser says the request comes from another site, `Some(false)` when
/// it says same origin, `None` when it says nothing (not a browser, or a very old one).
fn cross_site(headers: &HeaderMap) -> Option<bool> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return Some(site != "same-origin");
    }
    let origin = headers.get(ORIGIN)?.to_str().ok()?;
    let host = headers.get(HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin.split_once("://").map(|(_, h)| h);
    Some(origin == "null" || origin_host.is_none() || origin_host != host)
}

/// The value of cookie `name`.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

fn random_nonce() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Adds the security headers. HTML pages get a policy allowing only the app's own scripts (and
/// inline ones carrying `nonce`), its wasm, its styles; everything else gets `default-src
/// 'none'`. Inline `style` attributes stay allowed: the dashboard sizes bars with them.
fn secure(mut response: Response, nonce: Option<&str>) -> Response {
    let html = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("text/html"));
    let headers = response.headers_mut();
    if !headers.contains_key(CONTENT_SECURITY_POLICY) {
        let policy = match nonce.filter(|_| html) {
            Some(n) => format!(
                "default-src 'self'; script-src 'self' 'nonce-{n}' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; \
                 img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
            ),
            None => "default-src 'none'; frame-ancestors 'none'".into(),
        };
        if let Ok(v) = HeaderValue::from_str(&policy) {
            headers.insert(CONTENT_SECURITY_POLICY, v);
        }
    }
    let fixed: [(HeaderName, &str); 3] = [
        (HeaderName::from_static("x-content-type-options"), "nosniff"),
        (HeaderName::from_static("x-frame-options"), "DENY"),
        (HeaderName::from_static("referrer-policy"), "same-origin"),
    ];
    for (name, value) in fixed {
        headers.entry(name).or_insert(HeaderValue::from_static(value));
    }
    response
}

fn redirect(to: &str) -> Response {
    let location = HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static("/"));
    (StatusCode::SEE_OTHER, [(LOCATION, location)]).into_response()
}

/// Where to go after signing in: a path on this server, never another site.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') && !n.starts_with("/auth/") => n,
        _ => "/",
    }
}

fn session_cookie(value: &str, max_age_s: u64, secure: bool) -> HeaderValue {
    let flags = if secure { "; Secure" } else { "" };
    let cookie = format!("{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{flags}");
    HeaderValue::from_str(&cookie).unwrap_or(HeaderValue::from_static("berth_session=; Max-Age=0"))
}

fn over_tls(state: &AppState, headers: &HeaderMap) -> bool {
    state.secure_cookies || headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()) == Some("https")
}

/// The sign-in form's fields.
#[derive(Debug, Deserialize)]
struct SignIn {
    #[serde(default)]
    token: String,
    next: Option<String>,
}

/// `POST /auth/signin` (a form: `token`, `next`): opens a session and goes to `next`, or back
/// to the sign-in page saying why not. Too many failures from one address are refused for a
/// while (429).
async fn sign_in(State(state): State<AppState>, req: Request) -> Response {
    let from = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let over_tls = over_tls(&state, req.headers());
    if let Some(wait) = state.auth.signin_blocked(from) {
        let secs = wait.as_secs() + 1;
        let e = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", format!("too many failed sign-ins from this address; try again in {secs} s"));
        return ([(RETRY_AFTER, secs.to_string())], e).into_response();
    }
    let bytes = match axum::body::to_bytes(req.into_body(), 16 * 1024).await {
        Ok(b) => b,
        Err(_) => return ApiError::bad_request("the sign-in form is larger than 16 KiB").into_response(),
    };
    let form: SignIn = match serde_urlencoded::from_bytes(&bytes) {
        Ok(f) => f,
        Err(e) => return ApiError::bad_request(format!("sign-in form: {e}")).into_response(),
    };
    let next = safe_next(form.next.as_deref()).to_string();
    if form.token.trim().is_empty() {
        return redirect(&format!("/signin?error=empty&next={}", app::ui::urlencode(&next)));
    }
    match state.auth.sign_in(&form.token, from).await {
        Ok(Some((cookie, _caller))) => {
            let mut response = redirect(&next);
            response.headers_mut().insert(SET_COOKIE, session_cookie(&cookie, SESSION_TTL.as_secs(), over_tls));
            response
        }
        Ok(None) => redirect(&format!("/signin?error=invalid&next={}", app::ui::urlencode(&next))),
        Err(e) => {
            tracing::error!(error = %e, "sign-in failed");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log").into_response()
        }
    }
}

/// `POST /auth/signout`: ends the session and forgets the cookie.
async fn sign_out(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(session) = cookie(&headers, SESSION_COOKIE) {
        if let Err(e) = state.auth.sign_out(&session).await {
            tracing::error!(error = %e, "sign-out failed");
        }
    }
    let mut response = redirect("/signin");
    response.headers_mut().insert(SET_COOKIE, session_cookie("", 0, over_tls(&state, &headers)));
    response
}

async fn whoami(caller: Caller) -> Response {
    Json(caller.whoami()).into_response()
}

async fn list_tokens(State(state): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    Ok(Json(state.auth.tokens(&caller).await?).into_response())
}

async fn create_token(State(state): State<AppState>, caller: Caller, body: RawBody) -> Result<Response, ApiError> {
    let new: NewToken = super::jobs::decode(&body)?;
    let created = state.auth.create_token(&caller, &new).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn revoke_token(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(state.auth.revoke(&caller, &id).await?).into_response())
}

/// `GET /api/v1/audit?action=&actor=&cursor=&max_items=`.
async fn audit(State(state): State<AppState>, caller: Caller, params: Params) -> Result<Response, ApiError> {
    let q = audit_query(&params)?;
    Ok(Json(state.auth.audit(&caller, q.action, q.actor, q.cursor, q.limit).await?).into_response())
}

/// An audit-log query as the API and the dashboard read it.
pub struct AuditQuery<'a> {
    pub action: Option<&'a str>,
    pub actor: Option<&'a str>,
    pub cursor: Option<i64>,
    pub limit: i64,
}

pub fn audit_query(params: &Params) -> Result<AuditQuery<'_>, ApiError> {
    let limit = params.page_size(50)?;
    let cursor = params.get_i64("cursor")?;
    let action = params.get("action").filter(|a| !a.is_empty());
    if let Some(a) = action {
        if !app::auth::AUDIT_ACTIONS.contains(&a) {
            return Err(ApiError::bad_request(format!("action: `{a}` is not audited (one of {})", app::auth::AUDIT_ACTIONS.join(", "))));
        }
    }
    let actor = params.get("actor").filter(|a| !a.is_empty());
    Ok(AuditQuery { action, actor, cursor, limit })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(HeaderName::from_static(k), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn cross_site_is_told_by_fetch_metadata_or_origin() {
        assert_eq!(cross_site(&headers(&[("sec-fetch-site", "same-origin")])), Some(false));
        assert_eq!(cross_site(&headers(&[("sec-fetch-site", "cross-site")])), Some(true));
        assert_eq!(cross_site(&headers(&[("origin", "http://127.0.0.1:3000"), ("host", "127.0.0.1:3000")])), Some(false));
        assert_eq!(cross_site(&headers(&[("origin", "http://evil.example"), ("host", "127.0.0.1:3000")])), Some(true));
        assert_eq!(cross_site(&headers(&[("origin", "null"), ("host", "127.0.0.1:3000")])), Some(true));
        assert_eq!(cross_site(&headers(&[("host", "127.0.0.1:3000")])), None);
    }

    #[test]
    fn sign_in_only_goes_back_to_this_site() {
        assert_eq!(safe_next(Some("/jobs?state=failed")), "/jobs?state=failed");
        assert_eq!(safe_next(Some("//evil.example/")), "/");
        assert_eq!(safe_next(Some("https://evil.example/")), "/");
        assert_eq!(safe_next(Some("/\\evil.example")), "/");
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn cookies_are_found_among_others() {
        let h = headers(&[("cookie", "a=1; berth_session=abc; b=2")]);
        assert_eq!(cookie(&h, SESSION_COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&headers(&[("cookie", "berth_session=")]), SESSION_COOKIE), None);
    }
}
