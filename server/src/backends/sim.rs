//! A backend that runs nothing (`berth serve --simulate`): for load tests of the scheduler
//! and for trying a config at scale without the machines, as kwok does for Kubernetes and
//! Kueue's no-op runner for its performance tests.
//!
//! It offers the node the local backend would (same name, capacity and labels), so a config
//! written for the local backend admits onto it unchanged. A run lasts what its entrypoint
//! says: `sleep N` lasts N seconds (`N` in seconds, or with `s`, `m` or `h`); any other
//! entrypoint ends at once. Every run ends with code 0 and writes no output. A stopped run
//! just ends. Nothing outlives the server: after a restart, a run it was simulating is
//! reported lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use super::local::LocalConfig;
use super::{lock, Adopted, Backend, BackendError, BoxFuture, Exit, Outcome, RunId, StartSpec, Stream, Traits};
use crate::engine::Node;

/// Simulated runs on the local backend's node.
#[derive(Debug)]
pub struct SimBackend {
    cfg: LocalConfig,
    exits: UnboundedSender<Exit>,
    /// Runs under way, each a timer task.
    live: Arc<Mutex<HashMap<RunId, tokio::task::AbortHandle>>>,
}

impl SimBackend {
    pub fn new(cfg: LocalConfig, exits: UnboundedSender<Exit>) -> Arc<SimBackend> {
        Arc::new(SimBackend { cfg, exits, live: Arc::default() })
    }
}

/// The handle of a simulated run, as its start gave it and its adoption gives it again.
fn handle_of(run: &RunId) -> String {
    format!("sim-{}", run.key())
}

/// How long a run of `entrypoint` lasts: `sleep N` lasts N, anything else nothing.
pub fn simulated_runtime(entrypoint: &str) -> Duration {
    let Some(arg) = entrypoint.trim().strip_prefix("sleep ").map(str::trim) else { return Duration::ZERO };
    let (number, unit) = match arg.char_indices().last() {
        Some((i, c @ ('s' | 'm' | 'h'))) => (&arg[..i], c),
        _ => (arg, 's'),
    };
    let scale = match unit {
        'm' => 60.0,
        'h' => 3600.0,
        _ => 1.0,
    };
    match number.parse::<f64>() {
        Ok(n) if n >= 0.0 => Duration::try_from_secs_f64(n * scale).unwrap_or(Duration::MAX),
        _ => Duration::ZERO,
    }
}

impl Backend for SimBackend {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    fn nodes(&self) -> Vec<Node> {
        vec![self.cfg.node()]
    }

    fn start(&self, spec: StartSpec) -> BoxFuture<'_, Result<String, BackendError>> {
        let lasts = simulated_runtime(&spec.entrypoint);
        let (run, exits, live) = (spec.run, self.exits.clone(), self.live.clone());
        let mut runs = lock(&self.live);
        if runs.contains_key(&run) {
            return Box::pin(async move { Err(BackendError::Failed(format!("run {} was already started", run.key()))) });
        }
        let handle = handle_of(&run);
        let timer = {
            let run = run.clone();
            tokio::spawn(async move {
                tokio::time::sleep(lasts).await;
                lock(&live).remove(&run);
                let _ = exits.send(Exit { run, outcome: Outcome::Exited(0) });
            })
        };
        runs.insert(run, timer.abort_handle());
        Box::pin(async move { Ok(handle) })
    }

    fn stop(&self, run: RunId, _handle: String) -> BoxFuture<'_, Result<(), BackendError>> {
        if let Some(timer) = lock(&self.live).remove(&run) {
            timer.abort();
        }
        Box::pin(async { Ok(()) })
    }

    fn adopt(&self, spec: StartSpec, _handle: Option<String>) -> BoxFuture<'_, Adopted> {
        let watched = lock(&self.live).contains_key(&spec.run);
        Box::pin(async move {
            match watched {
                true => Adopted::Running { handle: handle_of(&spec.run) },
                false => Adopted::Ended(Outcome::Failed("a simulated run does not outlive the server that simulated it".into())),
            }
        })
    }

    fn logs(&self, _run: RunId, _stream: Stream, _tail_bytes: Option<u64>) -> BoxFuture<'_, Result<Vec<u8>, BackendError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn traits(&self) -> Traits {
        Traits { starts_at_once: true, ..Traits::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_lasts_what_its_sleep_says_and_anything_else_ends_at_once() {
        assert_eq!(simulated_runtime("sleep 0.5"), Duration::from_millis(500));
        assert_eq!(simulated_runtime("  sleep 2s "), Duration::from_secs(2));
        assert_eq!(simulated_runtime("sleep 1.5m"), Duration::from_secs(90));
        assert_eq!(simulated_runtime("sleep 1h"), Duration::from_secs(3600));
        assert_eq!(simulated_runtime("python train.py"), Duration::ZERO);
        assert_eq!(simulated_runtime("sleep -1"), Duration::ZERO);
        assert_eq!(simulated_runtime("sleep forever"), Duration::ZERO);
        assert_eq!(simulated_runtime("sleep 1e300"), Duration::MAX);
    }
}
