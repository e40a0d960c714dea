//! The one application state, cloned into every handler and given to the dashboard.

use std::sync::Arc;

use crate::db::Db;
use crate::service::ConfigService;

/// Everything a request may need.
#[derive(Debug, Clone)]
pub struct AppState {
    pub db: Db,
    pub config: Arc<ConfigService>,
}

impl AppState {
    /// State over a migrated database; creates config version 1 on a fresh one.
    pub async fn new(db: Db) -> Result<Self, crate::service::ServiceError> {
        let config = Arc::new(ConfigService::new(crate::store::ConfigStore::new(db.clone())));
        config.ensure_initial().await?;
        Ok(AppState { db, config })
    }
}
