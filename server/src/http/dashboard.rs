//! Serves the Leptos dashboard: server-side rendering, server functions and the static site
//! (wasm, js, css). The dashboard reaches the services through [`app::ui::backend::Backend`].

use std::sync::Arc;

use app::api::{ConfigVersion, VersionPage};
use app::auth::{AuditPage, CreatedToken, NewToken, TokenInfo, Whoami};
use app::config::diff::ConfigDiff;
use app::config::Problem;
use app::config::parse::{parse, Format};
use app::jobs::{Admissions, CohortView, EventPage, History, Job, JobPage, JobRequest, NodeView, QueueView, StageResults, StageStatus, UsageReport};
use app::preview::PreviewReport;
use app::ui::backend::{Answer, Backend, SharedBackend};
use app::ui::files::{FileNames, SplitLoads};
use app::ui::server_fns::{ApplyInput, ApplyOutcome, SubmitOutcome};
use axum::http::request::Parts;
use axum::Router;
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};

use crate::services::auth::{AuthError, Caller};
use crate::http::auth::{audit_query, CspNonce};
use crate::http::body::Params;
use crate::http::error::ApiError;
use crate::http::jobs::{event_query, history_query, job_query, last_lines, tail_bytes};
use crate::http::workflows::{admissions_query, usage_query};
use crate::backends::Stream;
use crate::store::jobs::time_of;
use crate::services::jobs::RuntimeError;
use crate::services::config::ServiceError;
use crate::state::AppState;
use crate::store::config::{ApplyMeta, StoreError};

/// The dashboard's pages, linking the static files by `files` (their hashed names) and
/// preloading the code of the page group each renders (`split`).
pub fn dashboard(state: AppState, options: LeptosOptions, files: FileNames, split: Option<Arc<SplitLoads>>) -> Router {
    let routes = generate_route_list(app::ui::App);
    let backend: SharedBackend = Arc::new(state);
    let shell_options = options.clone();
    let split = split.map(|s| s.manifest());
    // Every page, the 404 page too, gets the backend, the files' names and the nonce the auth
    // middleware put in this response's Content-Security-Policy (without it a 404 page's
    // scripts are blocked).
    let context = move || {
        provide_context(backend.clone());
        provide_context(files.clone());
        if let Some(split) = &split {
            provide_context(split.clone());
        }
        if let Some(nonce) = use_context::<Parts>().and_then(|p| p.extensions.get::<CspNonce>().cloned()) {
            provide_context(leptos::nonce::Nonce::from_value(nonce.0));
        }
    };
    Router::new()
        .leptos_routes_with_context(&options, routes, context.clone(), move || app::ui::shell(shell_options.clone()))
        .fallback(leptos_axum::file_and_error_handler_with_context(context, app::ui::shell))
        .with_state(options)
}

fn message(e: ServiceError) -> String {
    ApiError::from(e).message
}

fn failed(e: RuntimeError) -> String {
    ApiError::from(e).message
}

fn refused(e: AuthError) -> String {
    ApiError::from(e).message
}

/// A URL query string as the REST handlers' parameters.
fn params(query: &str) -> Result<Params, String> {
    Params::parse(query).map_err(|e| e.message)
}

/// The signed-in caller of the request being served, as the auth middleware found it.
fn caller() -> Result<Caller, String> {
    use_context::<Parts>()
        .and_then(|p| p.extensions.get::<Caller>().cloned())
        .ok_or_else(|| "you are not signed in".to_string())
}

fn meta(input: ApplyInput) -> ApplyMeta {
    ApplyMeta {
        message: input.message.filter(|m| !m.trim().is_empty()),
        expected_active_version: input.expected_active_version,
        ..ApplyMeta::default()
    }
}

/// The refusals a dashboard user can act on become outcomes; the rest stay errors.
fn outcome(result: Result<app::api::ApplyResponse, ServiceError>) -> Result<ApplyOutcome, String> {
    match result {
        Ok(r) => Ok(ApplyOutcome::Applied { version: r.version, changed: r.changed, warnings: r.warnings }),
        Err(ServiceError::Store(StoreError::Conflict { expected, actual })) => {
            Ok(ApplyOutcome::Conflict { expected, active: actual })
        }
        Err(ServiceError::Invalid(report)) => Ok(ApplyOutcome::Invalid { problems: report.problems }),
        Err(e) => Err(message(e)),
    }
}

impl Backend for AppState {
    fn whoami(&self) -> Option<Whoami> {
        caller().ok().map(|c| c.whoami())
    }

    fn tokens(&self) -> Answer<'_, Vec<TokenInfo>> {
        let caller = caller();
        Box::pin(async move { self.auth.tokens(&caller?).await.map_err(refused) })
    }

    fn create_token(&self, new: NewToken) -> Answer<'_, CreatedToken> {
        let caller = caller();
        Box::pin(async move { self.auth.create_token(&caller?, &new).await.map_err(refused) })
    }

    fn revoke_token(&self, id: String) -> Answer<'_, TokenInfo> {
        let caller = caller();
        Box::pin(async move { self.auth.revoke(&caller?, &id).await.map_err(refused) })
    }

    fn audit(&self, query: String) -> Answer<'_, AuditPage> {
        let caller = caller();
        Box::pin(async move {
            let p = params(&query)?;
            let q = audit_query(&p).map_err(|e| e.message)?;
            self.auth.audit(&caller?, q.action, q.actor, q.cursor, q.limit).await.map_err(refused)
        })
    }

    fn config(&self, version: Option<i64>) -> Answer<'_, ConfigVersion> {
        Box::pin(async move { self.config.get(version).await.map_err(message) })
    }

    fn versions(&self, cursor: Option<String>, max_items: i64) -> Answer<'_, VersionPage> {
        Box::pin(async move { self.config.list(Some(max_items), cursor.as_deref()).await.map_err(message) })
    }

    fn diff(&self, from: Option<i64>, to: Option<i64>) -> Answer<'_, ConfigDiff> {
        Box::pin(async move { self.config.diff(from, to).await.map_err(message) })
    }

    fn apply(&self, yaml: String, input: ApplyInput) -> Answer<'_, ApplyOutcome> {
        let caller = caller();
        Box::pin(async move {
            let config = match parse(&yaml, Format::Yaml) {
                Ok(c) => c,
                Err(problems) => return Ok(ApplyOutcome::Invalid { problems }),
            };
            outcome(self.config.apply(&caller?, &config, &meta(input)).await)
        })
    }

    fn capacity_warnings(&self, yaml: String) -> Answer<'_, Vec<Problem>> {
        Box::pin(async move {
            // A draft that does not parse has its problems shown by the browser already.
            Ok(parse(&yaml, Format::Yaml).map(|c| self.config.capacity_warnings(&c)).unwrap_or_default())
        })
    }

    fn rollback(&self, version: i64, input: ApplyInput) -> Answer<'_, ApplyOutcome> {
        let caller = caller();
        Box::pin(async move { outcome(self.config.rollback(&caller?, version, &meta(input)).await) })
    }

    fn preview(&self, yaml: String, window: String, token: String) -> Answer<'_, PreviewReport> {
        Box::pin(async move {
            let draft = parse(&yaml, Format::Yaml).map_err(|problems| problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))?;
            let now = crate::clock::now_us();
            let span = crate::services::preview::window::resolve(Some(&serde_json::Value::String(window)), now)?;
            crate::services::preview::run_tracked(&crate::services::preview::Sources::of(self), &draft, span, now, &token)
                .await
                .map_err(|e| crate::http::error::ApiError::from(e).message)
        })
    }
    fn preview_progress(&self, token: String) -> Option<(u64, u64)> {
        crate::services::preview::progress(&token)
    }

    fn queues(&self) -> Answer<'_, Vec<QueueView>> {
        Box::pin(async move { self.runtime.queues(None).await.map_err(failed) })
    }

    fn queue(&self, name: String) -> Answer<'_, QueueView> {
        Box::pin(async move {
            let mut views = self.runtime.queues(Some(name)).await.map_err(failed)?;
            Ok(views.remove(0))
        })
    }

    fn cohorts(&self) -> Answer<'_, Vec<CohortView>> {
        Box::pin(async move { self.runtime.cohorts(None).await.map_err(failed) })
    }

    fn cohort(&self, name: String) -> Answer<'_, CohortView> {
        Box::pin(async move {
            let mut views = self.runtime.cohorts(Some(name)).await.map_err(failed)?;
            Ok(views.remove(0))
        })
    }

    fn leader(&self) -> Answer<'_, String> {
        Box::pin(async move { self.runtime.leader().await.map(|l| crate::http::leader_line(l.as_ref())).map_err(failed) })
    }

    fn nodes(&self) -> Answer<'_, Vec<NodeView>> {
        Box::pin(async move { self.runtime.nodes().await.map_err(failed) })
    }

    fn jobs(&self, query: String) -> Answer<'_, JobPage> {
        Box::pin(async move {
            let (filter, cursor, limit) = job_query(&params(&query)?).map_err(|e| e.message)?;
            self.runtime.jobs(&filter, cursor, limit).await.map_err(failed)
        })
    }

    fn job(&self, id: String) -> Answer<'_, Job> {
        Box::pin(async move { self.runtime.job(&id).await.map_err(failed) })
    }

    fn logs(&self, id: String, stderr: bool, tail: u64) -> Answer<'_, String> {
        Box::pin(async move {
            let stream = if stderr { Stream::Stderr } else { Stream::Stdout };
            let (log, _) = self.runtime.logs(&id, stream, Some(tail_bytes(tail))).await.map_err(failed)?;
            Ok(String::from_utf8_lossy(last_lines(&log, tail as usize)).into_owned())
        })
    }

    fn cancel(&self, id: String) -> Answer<'_, Job> {
        let caller = caller();
        Box::pin(async move { self.runtime.cancel(&id, &caller?).await.map_err(failed) })
    }

    fn set_priority(&self, id: String, priority: i64) -> Answer<'_, Job> {
        let caller = caller();
        Box::pin(async move { self.runtime.set_priority(&id, priority, &caller?).await.map_err(failed) })
    }

    fn submit(&self, request: JobRequest) -> Answer<'_, SubmitOutcome> {
        let caller = caller();
        Box::pin(async move {
            match self.runtime.submit(request, &caller?).await {
                Ok(job) => Ok(SubmitOutcome::Submitted(Box::new(job))),
                Err(RuntimeError::Rejected(job)) => Ok(SubmitOutcome::Rejected(job)),
                Err(RuntimeError::Invalid(message)) => Ok(SubmitOutcome::Invalid(message)),
                Err(e) => Err(failed(e)),
            }
        })
    }

    fn events(&self, query: String) -> Answer<'_, EventPage> {
        Box::pin(async move {
            let (filter, cursor, limit) = event_query(&params(&query)?).map_err(|e| e.message)?;
            self.runtime.events(&filter, cursor, limit).await.map_err(failed)
        })
    }

    fn history(&self, query: String) -> Answer<'_, History> {
        Box::pin(async move {
            let q = history_query(&params(&query)?).map_err(|e| e.message)?;
            let samples = self.runtime.history(&q).await.map_err(failed)?;
            Ok(History { since: time_of(q.since_us), until: time_of(q.until_us), step_s: q.step_us as f64 / 1e6, samples })
        })
    }

    fn stage(&self, id: String) -> Answer<'_, (StageStatus, StageResults)> {
        Box::pin(async move { Ok((self.runtime.stage(&id).await.map_err(failed)?, self.runtime.stage_results(&id).await.map_err(failed)?)) })
    }

    fn admissions(&self, query: String) -> Answer<'_, Admissions> {
        Box::pin(async move {
            let (queue, since, until) = admissions_query(&params(&query)?).map_err(|e| e.message)?;
            self.runtime.admissions(&queue, since, until).await.map_err(failed)
        })
    }

    fn usage(&self, query: String) -> Answer<'_, UsageReport> {
        Box::pin(async move {
            let (by, since, until) = usage_query(&params(&query)?).map_err(|e| e.message)?;
            self.runtime.usage(by, since, until).await.map_err(failed)
        })
    }
}
