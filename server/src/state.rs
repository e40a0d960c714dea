//! The one application state, cloned into every handler and given to the dashboard.

use std::sync::Arc;

use anyhow::Context;

use crate::db::Db;
use crate::runtime::backend::{Backend, Registry};
use crate::runtime::local::{LocalBackend, LocalConfig};
use crate::runtime::ray::{RayBackend, RayConfig};
use crate::runtime::store::JobStore;
use crate::runtime::{Runtime, Settings};
use crate::service::ConfigService;

/// Everything a request may need.
#[derive(Debug, Clone)]
pub struct AppState {
    pub db: Db,
    pub config: Arc<ConfigService>,
    pub runtime: Runtime,
    /// Set once the server begins shutting down: long-lived responses (the event stream)
    /// end so a graceful shutdown does not wait on open browser tabs.
    pub shutdown: Arc<tokio::sync::watch::Sender<bool>>,
}

/// How the runtime is set up: the loop's tunables, the local backend (`None`: no local
/// backend, jobs only run on other backends) and Ray clusters.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub settings: Settings,
    pub local: Option<LocalConfig>,
    pub ray: Vec<RayConfig>,
}

impl RuntimeOptions {
    /// Defaults with runs kept under `data_dir` and a local backend with the host's cores
    /// and memory.
    pub fn local(data_dir: std::path::PathBuf) -> Self {
        RuntimeOptions {
            local: Some(LocalConfig::detect(data_dir.clone())),
            ray: Vec::new(),
            settings: Settings { data_dir, ..Settings::default() },
        }
    }
}

impl AppState {
    /// State over a migrated database: creates config version 1 on a fresh one, recovers
    /// unfinished jobs and starts the admission loop.
    pub async fn start(db: Db, options: RuntimeOptions) -> anyhow::Result<Self> {
        let config = Arc::new(ConfigService::new(crate::store::ConfigStore::new(db.clone())));
        config.ensure_initial().await.context("cannot prepare the config store")?;
        let (exits_tx, exits_rx) = tokio::sync::mpsc::unbounded_channel();
        let mut backends = Registry::default();
        if let Some(local) = options.local {
            backends.register(LocalBackend::new(local, exits_tx.clone())).map_err(anyhow::Error::msg)?;
        }
        for cfg in options.ray {
            let ray = RayBackend::new(cfg, exits_tx.clone()).map_err(anyhow::Error::msg)?;
            // The first snapshot should have the cluster's nodes; an unreachable Ray is not
            // fatal (its nodes appear when it answers).
            if let Err(e) = ray.refresh_nodes().await {
                tracing::warn!(backend = ray.name(), error = %e, "Ray is not reachable at start; its nodes appear when it answers");
            }
            backends.register(ray).map_err(anyhow::Error::msg)?;
        }
        let store = JobStore::new(db.clone());
        let runtime = Runtime::start(store, config.clone(), backends, exits_rx, options.settings)
            .await
            .context("cannot start the admission loop")?;
        Ok(AppState { db, config, runtime, shutdown: Arc::new(tokio::sync::watch::channel(false).0) })
    }
}
