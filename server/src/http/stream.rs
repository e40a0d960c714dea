//! `GET /api/v1/stream`: server-sent events that tell live views something changed, so the
//! dashboard refetches what it shows instead of polling.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::Router;
use futures_util::stream::{self, Stream};
use serde_json::json;

use crate::state::AppState;

/// Bursts of writes become one message per this interval at most.
const COALESCE: Duration = Duration::from_millis(400);

/// Routes nested under `/api/v1`.
pub fn routes() -> Router<AppState> {
    Router::new().route("/stream", get(changes))
}

/// A `change` event with the job store's write counter and the active config version: at
/// once on connect (so a reconnecting client catches up), then after each change. A comment
/// every 15 s keeps proxies from closing an idle connection; the stream ends when the server
/// shuts down.
async fn changes(State(state): State<AppState>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receivers = (state.runtime.store().subscribe(), state.config.subscribe(), state.shutdown.subscribe(), true);
    let events = stream::unfold(receivers, |(mut jobs, mut config, mut stop, first)| async move {
        if *stop.borrow() {
            return None;
        }
        if !first {
            tokio::select! {
                r = jobs.changed() => r.ok()?,
                r = config.changed() => r.ok()?,
                _ = stop.wait_for(|s| *s) => return None,
            }
            tokio::time::sleep(COALESCE).await;
        }
        let data = json!({ "jobs": *jobs.borrow_and_update(), "config": config.borrow_and_update().version });
        Some((Ok(Event::default().event("change").data(data.to_string())), (jobs, config, stop, false)))
    });
    Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
