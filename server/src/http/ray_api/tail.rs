//! `GET /api/jobs/{id}/logs/tail`: the WebSocket `ray job submit` and `ray job logs -f`
//! follow. Like Ray's, it sends the log from its beginning as text messages while the job
//! runs (stdout and stderr, as Ray merges them), and closes normally once the job has
//! ended, after its last bytes. A run that starts over (after a preemption or a retry) is
//! announced by a line, then its log follows.

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::Response;

use super::{RayError, BOTH};
use crate::http::body::PathText;
use crate::http::follow::{Follower, Growth};
use crate::state::AppState;

/// Upgrades once the job is known (an unknown one is a plain 404, as in Ray).
pub(super) async fn tail(State(state): State<AppState>, PathText(reference): PathText, ws: WebSocketUpgrade) -> Result<Response, RayError> {
    let job = state.runtime.ray_job(&reference).await?;
    let follower = Follower::new(state.runtime.clone(), job.id, BOTH.iter().map(|s| (*s, 0)).collect(), 0);
    Ok(ws.on_upgrade(move |socket| send(socket, follower)))
}

async fn send(mut socket: WebSocket, mut follower: Follower) {
    while let Some(growth) = follower.next().await {
        for g in growth {
            let text = match g {
                Growth::Bytes(_, bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Growth::NewRun(n) => format!("--- Berth: run {n} of this job starts (the one before was stopped or failed, and the job was requeued) ---\n"),
            };
            if socket.send(Message::Text(text.into())).await.is_err() {
                return; // the client went away
            }
        }
    }
    let close = CloseFrame { code: axum::extract::ws::close_code::NORMAL, reason: "job ended".into() };
    let _ = socket.send(Message::Close(Some(close))).await;
}
