//! The one application state, cloned into every handler and given to the dashboard.

use std::sync::Arc;

use anyhow::Context;

use crate::services::auth::Auth;
use crate::store::Db;
use crate::backends::{Backend, Registry};
use crate::backends::local::{LocalBackend, LocalConfig};
use crate::backends::ray::{RayBackend, RayConfig};
use crate::backends::slurm::{SlurmBackend, SlurmConfig};
use crate::backends::sim::SimBackend;
use crate::store::jobs::JobStore;
use crate::admission::Settings;
use crate::services::jobs::Runtime;
use crate::services::config::ConfigService;
use crate::store::config::ConfigStore;
use crate::services::packages::{PackageSettings, Packages};
use crate::store::packages::PackageStore;

/// Everything a request may need.
#[derive(Debug, Clone)]
pub struct AppState {
    pub db: Db,
    pub config: Arc<ConfigService>,
    pub runtime: Runtime,
    /// Packages uploaded through Ray's API (working directories, `py_modules`).
    pub packages: Arc<Packages>,
    /// The Ray clusters, for the reports their runs send (`POST /api/v1/runs/{run}/exit`).
    pub ray: Vec<Arc<RayBackend>>,
    /// Tokens, sessions, the audit log, and whether anonymous callers are let in.
    pub auth: Arc<Auth>,
    /// Mark the session cookie `Secure`.
    pub secure_cookies: bool,
    /// Set once the server begins shutting down: long-lived responses (the event stream)
    /// end so a graceful shutdown does not wait on open browser tabs.
    pub shutdown: Arc<tokio::sync::watch::Sender<bool>>,}

/// How the runtime is set up: the loop's tunables, the local backend (`None`: no local
/// backend, jobs only run on other backends), Ray clusters and Slurm clusters.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub settings: Settings,
    pub local: Option<LocalConfig>,
    pub ray: Vec<RayConfig>,
    pub slurm: Vec<SlurmConfig>,
    pub access: Access,
    pub packages: PackageSettings,
    /// One of several replicas on PostgreSQL (`berth serve` on a PostgreSQL URL); `None`:
    /// the only process, which runs the admission loop itself.
    pub replica: Option<crate::replicas::ReplicaOptions>,
}

/// Who gets in.
#[derive(Debug, Clone)]
pub struct Access {
    /// Anonymous local mode: callers without credentials act as an admin.
    pub anonymous: bool,
    /// The first admin token's secret on a fresh database (else one is made and printed).
    pub admin_token: Option<String>,
    pub secure_cookies: bool,
}

impl RuntimeOptions {
    /// Defaults with runs kept under `data_dir`, a local backend with the host's cores and
    /// memory, and anonymous access (`berth serve` turns it off unless `--anonymous`).
    pub fn local(data_dir: std::path::PathBuf) -> Self {
        RuntimeOptions {
            local: Some(LocalConfig::detect(data_dir.clone())),
            ray: Vec::new(),
            slurm: Vec::new(),
            settings: Settings { data_dir, ..Settings::default() },
            access: Access { anonymous: true, admin_token: None, secure_cookies: false },
            packages: PackageSettings::default(),
            replica: None,
        }
    }
}

impl AppState {
    /// State over a migrated database: creates config version 1 on a fresh one, recovers
    /// unfinished jobs and starts the admission loop.
    pub async fn start(db: Db, options: RuntimeOptions) -> anyhow::Result<Self> {
        let config = Arc::new(ConfigService::start(ConfigStore::new(db.clone())).await.context("cannot prepare the config store")?);
        let auth = Arc::new(Auth::new(db.clone(), options.access.anonymous));
        let made = auth.bootstrap(options.access.admin_token.as_deref()).await.context("cannot create the first admin token")?;
        if let Some(secret) = made {
            // Printed, not logged: it is shown this once and never stored in the clear.
            eprintln!("berth: first start: the admin token is\n\n    {secret}\n\nKeep it: it is shown only now. Use it with `berth --token …` or to sign in to the dashboard.");
        }
        let (exits_tx, exits_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut backends = Registry::default();
        let mut ray_backends = Vec::new();
        match options.local {
            Some(local) if local.simulate => {
                tracing::warn!(node = %local.node_id, "simulating the local node (--simulate): jobs admitted to it do not run");
                backends.register(SimBackend::new(local, exits_tx.clone())).map_err(anyhow::Error::msg)?
            }
            Some(local) => backends.register(LocalBackend::new(local, exits_tx.clone())).map_err(anyhow::Error::msg)?,
            None => {}
        }
        for cfg in options.ray {
            let ray = RayBackend::new(cfg, exits_tx.clone()).map_err(anyhow::Error::msg)?;
            // The first snapshot should have the cluster's nodes; an unreachable Ray is not
            // fatal (its nodes appear when it answers).
            if let Err(e) = ray.refresh_nodes().await {
                tracing::warn!(backend = ray.name(), error = %e, "Ray is not reachable at start; its nodes appear when it answers");
            }
            ray_backends.push(ray.clone());
            backends.register(ray).map_err(anyhow::Error::msg)?;
        }
        for cfg in options.slurm {
            let slurm = SlurmBackend::new(cfg, exits_tx.clone()).map_err(anyhow::Error::msg)?;
            if let Err(e) = slurm.refresh_nodes().await {
                tracing::warn!(backend = slurm.name(), error = %e, "Slurm is not reachable at start; its nodes appear when it answers");
            }
            backends.register(slurm).map_err(anyhow::Error::msg)?;
        }
        let store = JobStore::new(db.clone());
        let packages = Arc::new(Packages::new(PackageStore::new(db.clone(), options.settings.data_dir.clone()), options.packages));
        packages.collect_in_background();
        // The Prometheus series (`/metrics`), recorded by the loop, the job service and the router.
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let runtime = Runtime::start(store, config.clone(), backends, exits_rx, options.settings, packages.clone(), metrics, options.replica)
            .await
            .context("cannot start the admission loop")?;
        Ok(AppState {
            db,
            config,
            runtime,
            packages,
            ray: ray_backends,
            auth,
            secure_cookies: options.access.secure_cookies,
            shutdown: Arc::new(tokio::sync::watch::channel(false).0),
        })
    }
}
