//! The one application state, cloned into every handler and given to the dashboard.

use std::sync::Arc;

use anyhow::Context;

use crate::db::Db;
use crate::runtime::backend::Registry;
use crate::runtime::local::{LocalBackend, LocalConfig};
use crate::runtime::store::JobStore;
use crate::runtime::{Runtime, Settings};
use crate::service::ConfigService;

/// Everything a request may need.
#[derive(Debug, Clone)]
pub struct AppState {
    pub db: Db,
    pub config: Arc<ConfigService>,
    pub runtime: Runtime,
}

/// How the runtime is set up: the loop's tunables and the local backend (`None`: no local
/// backend, jobs only run on other backends).
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub settings: Settings,
    pub local: Option<LocalConfig>,
}

impl RuntimeOptions {
    /// Defaults with runs kept under `data_dir` and a local backend with the host's cores
    /// and memory.
    pub fn local(data_dir: std::path::PathBuf) -> Self {
        RuntimeOptions {
            local: Some(LocalConfig::detect(data_dir.clone())),
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
        let store = JobStore::new(db.clone());
        let runtime = Runtime::start(store, config.clone(), backends, exits_rx, options.settings)
            .await
            .context("cannot start the admission loop")?;
        Ok(AppState { db, config, runtime })
    }
}
