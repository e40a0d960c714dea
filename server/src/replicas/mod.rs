//! Replicas on PostgreSQL: any number of `berth serve` processes on one database. Each
//! serves the API, the dashboard and the live stream; the one holding the leader lease
//! ([`lease`]) runs the admission loop and talks to the backends.
//!
//! The driver here alternates two roles for the life of the process:
//! - **follower** ([`follow`]): tries to take the lease a few times per lease length; jobs
//!   stored here and commands made here go to the leader through NOTIFY ([`notify`]);
//! - **leader**: a fresh admission loop under a [`Term`] recovers from the database and
//!   the backends exactly as after a restart, then runs until the lease is lost, a commit
//!   fails, or the server shuts down. Its commits are fenced by the lease's epoch; it
//!   starts nothing once the lease may have lapsed.

pub mod follow;
pub mod lease;
pub mod notify;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::admission::{Cmd, Loop, Settings, Shared, Term};
use crate::backends::{Exit, Registry};
use crate::clock::SystemClock;
use crate::metrics::Metrics;
use crate::services::config::ConfigService;
use crate::store::jobs::JobStore;
use crate::store::AnyPool;
pub use lease::Lease;

/// How replicas are set up (`berth serve` on PostgreSQL).
#[derive(Debug, Clone)]
pub struct ReplicaOptions {
    /// The name shown as the leader (`--replica-name`, else host:port).
    pub name: String,
    /// The database URL (the listener opens a connection of its own).
    pub url: String,
    /// How long the lease holds unrenewed.
    pub lease: Duration,
}

/// What the driver runs the loop with, from term to term.
pub struct Parts {
    pub lease: Arc<Lease>,
    pub pool: AnyPool,
    pub store: JobStore,
    pub backends: Registry,
    pub settings: Settings,
    pub shared: Arc<RwLock<Shared>>,
    pub config: Arc<ConfigService>,
    pub metrics: Arc<Metrics>,
    pub awaited: notify::Awaited,
    pub stale: Arc<AtomicBool>,
}

/// Starts the listener and the driver; `cmds` feeds the driver.
pub fn start(p: Parts, url: String, cmds_tx: mpsc::UnboundedSender<Cmd>, cmds: mpsc::UnboundedReceiver<Cmd>, exits: mpsc::UnboundedReceiver<Exit>) {
    let listening = notify::Listening {
        url,
        pool: p.pool.clone(),
        lease: p.lease.clone(),
        store: p.store.clone(),
        config: p.config.clone(),
        cmds: cmds_tx,
        awaited: p.awaited.clone(),
        stale: p.stale.clone(),
    };
    tokio::spawn(notify::listen(listening));
    tokio::spawn(drive(p, cmds, exits));
}

/// Follows, leads when the lease is taken, follows again when it is lost.
async fn drive(p: Parts, mut cmds: mpsc::UnboundedReceiver<Cmd>, mut exits: mpsc::UnboundedReceiver<Exit>) {
    let gauge = p.metrics.leader.with_label_values(&[&p.lease.name]);
    gauge.set(0);
    loop {
        let Some(epoch) = follow::follow(&p, &mut cmds, &mut exits).await else { return };
        tracing::info!(replica = %p.lease.name, epoch, "this replica leads: recovering the jobs");
        gauge.set(1);
        let keeper = tokio::spawn({
            let lease = p.lease.clone();
            async move { lease.keep().await }
        });
        let term = Term { epoch, leading: p.lease.leading.subscribe(), until: p.lease.until.clone() };
        let mut lp = Loop::new(p.store.clone(), p.backends.clone(), p.settings.clone(), p.shared.clone(), p.config.subscribe(), cmds, exits, Arc::new(SystemClock)).under(term);
        lp.metrics = p.metrics.clone();
        let (lp, ran) = match lp.recover().await {
            Ok(()) if !lp.deposed() => (lp.run().await, true),
            Ok(()) => (lp, false),
            Err(e) => {
                tracing::warn!(error = %e, "cannot recover the jobs as the new leader; following again");
                (lp, false)
            }
        };
        // A loop that ran and was not deposed ended because the server shuts down.
        let shutting_down = ran && !lp.deposed();
        (cmds, exits) = lp.into_channels();
        keeper.abort();
        for b in p.backends.iter() {
            b.stand_down();
        }
        p.lease.release().await;
        gauge.set(0);
        if shutting_down {
            return;
        }
        tracing::warn!(replica = %p.lease.name, epoch, "this replica no longer leads");
        // Jobs stored here that the ended loop took in may be unknown to the next leader
        // (stored after it recovered): it reads them all again.
        if let Err(e) = notify::send(&p.pool, "berth_wake", "sweep").await {
            tracing::warn!(error = %e, "cannot ask the leader to catch up");
        }
    }
}
