//! Every failure of the API as one JSON shape, `{"error": {code, message, details}}`, with the
//! status code that fits. The mapping from service errors happens here and only here.

use app::api::{ErrorBody, ErrorDetail};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::services::auth::{AuthError, Denied};
use crate::services::preview::PreviewError;
use crate::services::jobs::RuntimeError;
use crate::services::packages::PackageError;
use crate::services::config::ServiceError;
use crate::store::config::StoreError;

/// An API error: status, machine-readable code, message for people, optional details.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: serde_json::Value,
}

impl ApiError {
    /// 422 for a config that does not parse (syntax, types, unknown keys), like any other
    /// invalid config.
    pub fn invalid_config(problems: Vec<app::config::Problem>) -> Self {
        ServiceError::Invalid(app::config::Report { problems }).into()
    }

    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404 with `message`.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 401: no credentials, or ones that are not (or no longer) valid.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// Any status with a code and message, no details.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), details: serde_json::Value::Null }
    }
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::Invalid(report) => ApiError {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                code: "invalid_config",
                message: summarize(&report),
                details: json!({ "problems": report.problems }),
            },
            ServiceError::BadRequest(message) => ApiError::bad_request(message),
            ServiceError::Forbidden(denied) => denied.into(),
            ServiceError::Store(StoreError::NotFound(v)) => ApiError::not_found(format!("config version {v} does not exist")),
            ServiceError::Store(e @ StoreError::Conflict { expected, actual }) => ApiError {
                status: StatusCode::CONFLICT,
                code: "conflict",
                message: e.to_string(),
                details: json!({ "expected_active_version": expected, "active_version": actual }),
            },
            ServiceError::Store(e) => {
                tracing::error!(error = %e, "store failure");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log")
            }
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(err: RuntimeError) -> Self {
        let message = err.to_string();
        match err {
            RuntimeError::Invalid(m) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", m),
            RuntimeError::Rejected(job) => ApiError {
                status: StatusCode::UNPROCESSABLE_ENTITY,
                code: "rejected",
                message,
                details: json!({ "job": job }),
            },
            RuntimeError::NotFound(_) | RuntimeError::StageNotFound(_) => ApiError::not_found(message),
            RuntimeError::NotLive(_) => ApiError::new(StatusCode::CONFLICT, "job_ended", message),
            RuntimeError::Forbidden(denied) => denied.into(),
            RuntimeError::Stopped => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message),
            RuntimeError::Backend(m) => ApiError::new(StatusCode::BAD_GATEWAY, "backend", m),
            RuntimeError::Store(e) => {
                tracing::error!(error = %e, "job store failure");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log")
            }
        }
    }
}

impl From<Denied> for ApiError {
    fn from(denied: Denied) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", denied.0)
    }
}

impl From<AuthError> for ApiError {
    fn from(err: AuthError) -> Self {
        match err {
            AuthError::Denied(denied) => denied.into(),
            AuthError::Invalid(m) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", m),
            e @ AuthError::NotFound(_) => ApiError::not_found(e.to_string()),
            AuthError::Db(e) => {
                tracing::error!(error = %e, "auth store failure");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log")
            }
        }
    }
}

impl From<PackageError> for ApiError {
    fn from(err: PackageError) -> Self {
        let message = err.to_string();
        match err {
            PackageError::Invalid(_) => ApiError::bad_request(message),
            PackageError::TooLarge { .. } => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message),
            PackageError::Forbidden(denied) => denied.into(),
            PackageError::Conflict(_) => ApiError::new(StatusCode::CONFLICT, "conflict", message),
            PackageError::Store(e) => {
                tracing::error!(error = %e, "package store failure");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see the server log")
            }
        }
    }
}

impl From<PreviewError> for ApiError {
    fn from(err: PreviewError) -> Self {
        match err {
            PreviewError::Invalid(report) => ServiceError::Invalid(report).into(),
            PreviewError::BadRequest(m) => ApiError::bad_request(m),
            // 499 is nginx's "client closed request": nobody is left to read it.
            PreviewError::Cancelled => ApiError::new(StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST), "cancelled", "the preview was cancelled"),
            PreviewError::Service(e) => e.into(),
            PreviewError::Store(e) => RuntimeError::from(e).into(),
        }
    }
}

fn summarize(report: &app::config::Report) -> String {
    let errors: Vec<_> = report.errors().collect();
    match errors.as_slice() {
        [one] => format!("invalid config: {one}"),
        many => format!("invalid config: {} errors, first: {}", many.len(), many[0]),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail { code: self.code.to_string(), message: self.message, details: self.details },
        };
        (self.status, axum::Json(body)).into_response()
    }
}
