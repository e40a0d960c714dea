//! Watching a run: its own task rotates the logs, waits for the end and sends the exit.

use super::*;

/// Where an adopted run's exit code will appear.
pub(super) enum ExitSource {
    Journal(Arc<Journal>, String),
    Legacy(Paths),
}

impl ExitSource {
    pub(super) fn exit(&self) -> Option<i32> {
        match self {
            ExitSource::Journal(j, key) => j.lookup(key).and_then(|r| r.exit),
            ExitSource::Legacy(old) => old.read_legacy().exit,
        }
    }
}

/// One watched run: its own task rotates the logs, waits for the end and sends the [`Exit`].
pub(super) struct Watch {
    pub(super) run: RunId,
    pub(super) proc: Proc,
    pub(super) paths: Paths,
    /// For a run started before a restart (not our child): where its code will be.
    pub(super) adopted: Option<ExitSource>,
    pub(super) grace: Duration,
    pub(super) log_limit: u64,
    /// A log was rotated: its `.1` holds output, so it is no spare.
    pub(super) rotated: std::sync::atomic::AtomicBool,
    pub(super) exits: UnboundedSender<Exit>,
    pub(super) live: Arc<Mutex<HashMap<RunId, Proc>>>,
    pub(super) spares: Arc<Spares>,
}

impl Watch {
    /// With the child, waits for it; without (an adopted run), polls for the leader to go.
    pub(super) async fn run(self, child: Option<tokio::process::Child>) {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let outcome = match child {
            Some(mut child) => loop {
                tokio::select! {
                    status = child.wait() => break match status {
                        Ok(s) => match (s.code(), s.signal()) {
                            (Some(code), _) => Outcome::Exited(code),
                            (None, Some(sig)) => Outcome::Signaled(sig),
                            (None, None) => Outcome::Failed(format!("process ended with status {s}")),
                        },
                        Err(e) => Outcome::Failed(format!("waiting for the process: {e}")),
                    },
                    _ = tick.tick() => self.bound_logs().await,
                }
            },
            None => loop {
                tick.tick().await;
                self.bound_logs().await;
                if !is_alive(self.proc, &self.run.key()) {
                    break match self.adopted.as_ref().and_then(ExitSource::exit) {
                        Some(code) => Outcome::Exited(code),
                        None => Outcome::Failed("process ended without recording an exit code (killed by a signal?)".into()),
                    };
                }
            },
        };
        end_group(self.proc, &self.run.key(), self.grace).await;
        self.bound_logs().await;
        self.live.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.run);
        // Before the send, so the start the exit lets in can take what this run left empty,
        // unless a spawn is under way (lease checks wait for it): then the next start takes
        // a spare kept ready (see `SPARE_FLOOR`), and the blocking pool recycles this run's
        // after the send. A log can also look held for a moment after its run ended: ask
        // again a few times, then leave it to an escaped process.
        let recycle = self.paths.legacy.is_none() && !group_exists(self.proc.pid);
        // Whether a `.1` may hold this run's output is known only for runs watched from
        // their start.
        let fresh = self.adopted.is_none() && !self.rotated.load(std::sync::atomic::Ordering::Relaxed);
        let recycled = recycle && self.spares.try_recycle(&self.paths, fresh) == Some(true);
        let _ = self.exits.send(Exit { run: self.run, outcome });
        if recycle && !recycled {
            let (spares, paths) = (self.spares, self.paths);
            tokio::task::spawn_blocking(move || {
                for ms in [0, 1, 4, 16, 64] {
                    std::thread::sleep(Duration::from_millis(ms));
                    if spares.recycle(&paths, fresh) {
                        break;
                    }
                }
            });
        }
    }

    /// Two stats; only a log past its bound goes to the blocking pool to be rotated.
    pub(super) async fn bound_logs(&self) {
        let limit = self.log_limit.max(1);
        for stream in [Stream::Stdout, Stream::Stderr] {
            let path = self.paths.log(stream);
            if fs::metadata(&path).map_or(true, |m| m.len() <= limit) {
                continue;
            }
            self.rotated.store(true, std::sync::atomic::Ordering::Relaxed);
            let rotated = tokio::task::spawn_blocking({
                let path = path.clone();
                move || rotate(&path, limit)
            });
            if let Ok(Err(e)) = rotated.await {
                tracing::warn!(log = %path.display(), error = %e, "log rotation failed");
            }
        }
    }
}
