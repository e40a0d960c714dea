//! The backend's background tasks: node refresh and status polling.

use super::*;

pub(super) async fn nodes_task(backend: Weak<SlurmBackend>) {
    loop {
        let Some(b) = backend.upgrade() else { return };
        let every = b.cfg.nodes_interval;
        let _ = b.refresh_nodes().await;
        drop(b);
        tokio::time::sleep(every).await;
    }
}

pub(super) async fn status_task(backend: Weak<SlurmBackend>) {
    loop {
        let Some(b) = backend.upgrade() else { return };
        let started = Instant::now();
        let asked = b.poll_once().await;
        tracing::trace!(asked, round_ms = started.elapsed().as_millis() as u64, "Slurm status round");
        let wait = b.cfg.poll_interval.saturating_sub(started.elapsed());
        drop(b);
        tokio::time::sleep(wait).await;
    }
}
