//! The config service: versions of the scheduler config, and the one active config.
//!
//! An apply runs parse (by the caller) → validate → compile → store, in that order, so
//! nothing is stored that the admission loop could not run. The compiled config it stored is
//! then published ([`ActiveConfig`]) to the loop and the submit path, which never read it
//! back from the database. Only [`ConfigService::start`] reads and compiles the stored
//! active version, once; if an older build stored one that does not compile, the server
//! starts on the newest version that does and says so ([`HeldBack`]).

use app::api::{ApplyResponse, ConfigVersion, VersionPage};
use app::config::diff::{diff_labeled, ConfigDiff};
use app::config::validate::{validate, validate_with_nodes, NodeInfo};
use std::sync::{Arc, RwLock};

use app::auth::Role;
use app::config::{Problem, Report, SchedulerConfig};
use tokio::sync::watch;

use crate::engine::{self, Compiled};
use crate::services::auth::{Caller, Denied};
use crate::store::config::{ApplyMeta, ConfigStore, StoreError};

/// What the service refuses or fails at; mapped once to HTTP in `http::error`.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("the config has {} error(s)", .0.errors().count())]
    Invalid(Report),
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Forbidden(#[from] Denied),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The config the scheduler runs: what the loop admits by and submissions are routed by.
#[derive(Debug)]
pub struct ActiveConfig {
    /// The version in force.
    pub version: i64,
    pub compiled: Arc<Compiled>,
    /// Set when the stored active version is not the one in force.
    pub held_back: Option<HeldBack>,
}

/// A stored active version the server could not run (written by an older build whose
/// validation let it through): the server runs the newest earlier version that compiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldBack {
    pub stored_version: i64,
    /// Why it cannot run, with the field path.
    pub problem: String,
}

impl HeldBack {
    /// What `config get` and the dashboard say about it.
    /// `in_force` 0 is the built-in default (no stored version could run).
    pub fn describe(&self, in_force: i64) -> String {
        let running = match in_force {
            0 => "the built-in default (every job to one queue without quota)".to_string(),
            v => format!("version {v}"),
        };
        format!(
            "version {} is stored as active but cannot run ({}); the scheduler keeps running {running}. Apply a corrected config to replace it.",
            self.stored_version, self.problem
        )
    }
}

/// The nodes the backends know now, as the validator takes them.
pub type NodeSource = Arc<dyn Fn() -> Vec<NodeInfo> + Send + Sync>;

/// Config versions: validate, apply, read, diff, roll back; and the active config.
#[derive(Clone)]
pub struct ConfigService {
    store: ConfigStore,
    /// The config in force, replaced by every apply made through this service.
    active: Arc<watch::Sender<Arc<ActiveConfig>>>,
    /// Where the nodes come from once the runtime runs: checks then include capacity.
    nodes: Arc<RwLock<Option<NodeSource>>>,
}

impl std::fmt::Debug for ConfigService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigService").field("store", &self.store).finish_non_exhaustive()
    }
}

impl ConfigService {
    /// A service over `store`: creates version 1 on a fresh database, then compiles the
    /// stored active version (or, when it does not compile, the newest one that does).
    pub async fn start(store: ConfigStore) -> Result<Self, ServiceError> {
        ensure_initial(&store).await?;
        let active = load_active(&store).await?;
        Ok(ConfigService { store, active: Arc::new(watch::channel(Arc::new(active)).0), nodes: Arc::default() })
    }

    /// From now on, checks compare quotas and flavors with the nodes `source` gives.
    pub fn know_nodes(&self, source: NodeSource) {
        *self.nodes.write().unwrap_or_else(|e| e.into_inner()) = Some(source);
    }

    /// Every problem of `config`; once the nodes are known, also the warnings about flavors
    /// that select no node and quotas above what the selected nodes have.
    pub fn check(&self, config: &SchedulerConfig) -> Report {
        let source = self.nodes.read().unwrap_or_else(|e| e.into_inner()).clone();
        match source {
            Some(nodes) => validate_with_nodes(config, &nodes()),
            None => validate(config),
        }
    }

    /// Only the problems of `config` that come from comparing it with the nodes (none while
    /// they are unknown): what the editor adds to the checks the browser runs itself.
    pub fn capacity_warnings(&self, config: &SchedulerConfig) -> Vec<Problem> {
        let plain = validate(config).problems;
        self.check(config).problems.into_iter().filter(|p| !plain.contains(p)).collect()
    }

    /// The config in force now.
    pub fn active(&self) -> Arc<ActiveConfig> {
        self.active.borrow().clone()
    }

    /// Sees every config put in force after this call.
    pub fn subscribe(&self) -> watch::Receiver<Arc<ActiveConfig>> {
        self.active.subscribe()
    }

    /// Reads the stored active version again and puts it in force when it is newer than
    /// the one in force (another replica applied it).
    pub async fn refresh(&self) -> Result<(), ServiceError> {
        let stored = load_active(&self.store).await?;
        let next = Arc::new(stored);
        self.active.send_if_modified(|current| {
            let newer = current.version < next.version;
            if newer {
                *current = next.clone();
            }
            newer
        });
        Ok(())
    }

    /// Puts a stored, compiled version in force, unless a newer one already is (two applies
    /// may finish in either order). A held-back start runs an older version than any apply
    /// stores, so an apply always replaces it.
    fn publish(&self, version: i64, compiled: Compiled) {
        let next = Arc::new(ActiveConfig { version, compiled: Arc::new(compiled), held_back: None });
        self.active.send_if_modified(|current| {
            let newer = current.version < version;
            if newer {
                *current = next;
            }
            newer
        });
    }
}

/// Creates version 1 (flavor `local`, queue `default`, one catch-all rule) on a fresh
/// database; a no-op otherwise, also when another replica races us to it.
async fn ensure_initial(store: &ConfigStore) -> Result<(), ServiceError> {
    if store.active_version().await? > 0 {
        return Ok(());
    }
    let meta = ApplyMeta {
        creator_id: "berth".into(),
        message: Some("initial config".into()),
        expected_active_version: Some(0),
        rollback_of: None,
    };
    match store.apply(&SchedulerConfig::initial(), &meta).await {
        Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The stored active version, compiled; when it does not compile, the newest earlier one
/// that does (logged, and kept in [`ActiveConfig::held_back`]).
async fn load_active(store: &ConfigStore) -> Result<ActiveConfig, ServiceError> {
    let stored = store.get(None).await?;
    let problem = match engine::compile(&stored.config) {
        Ok(compiled) => return Ok(ActiveConfig { version: stored.version, compiled: Arc::new(compiled), held_back: None }),
        Err(e) => e.to_string(),
    };
    let held_back = HeldBack { stored_version: stored.version, problem };
    for version in (1..stored.version).rev() {
        let Ok(older) = store.get(Some(version)).await else { continue };
        if let Ok(compiled) = engine::compile(&older.config) {
            tracing::error!(stored = stored.version, in_force = version, problem = %held_back.problem, "the active config version cannot run; running the newest version that can");
            return Ok(ActiveConfig { version, compiled: Arc::new(compiled), held_back: Some(held_back) });
        }
    }
    // No stored version compiles: run the built-in default (every job to one unlimited queue).
    tracing::error!(stored = stored.version, problem = %held_back.problem, "no stored config version can run; running the built-in default");
    let compiled = engine::compile(&SchedulerConfig::default()).expect("the empty config compiles");
    Ok(ActiveConfig { version: 0, compiled: Arc::new(compiled), held_back: Some(held_back) })
}

impl ConfigService {

    /// Validates and stores `config` as the new active version, made by `caller` (whatever
    /// `meta.creator_id` says: the author is who is signed in).
    pub async fn apply(&self, caller: &Caller, config: &SchedulerConfig, meta: &ApplyMeta) -> Result<ApplyResponse, ServiceError> {
        caller.require(Role::Editor, "applying a config")?;
        let meta = ApplyMeta { creator_id: caller.user.clone(), ..meta.clone() };
        self.store_version(config, &meta).await
    }

    async fn store_version(&self, config: &SchedulerConfig, meta: &ApplyMeta) -> Result<ApplyResponse, ServiceError> {
        // PostgreSQL cannot store a NUL character (the validator refuses one in the config).
        if meta.message.as_deref().is_some_and(|t| t.contains('\0')) {
            return Err(ServiceError::BadRequest("message: must not contain a NUL character".into()));
        }
        let report = self.check(config);
        if report.has_errors() {
            return Err(ServiceError::Invalid(report));
        }
        // Validation and the engine agree (a property test holds them to it); should they
        // ever not, the config is refused here rather than stored and left unrunnable.
        let compiled = engine::compile(config).map_err(|e| ServiceError::Invalid(Report { problems: vec![Problem::error(e.path, e.message)] }))?;
        let applied = self.store.apply(config, meta).await?;
        self.publish(applied.version, compiled);
        Ok(ApplyResponse {
            version: applied.version,
            changed: applied.previous.as_ref() != Some(config),
            warnings: report.warnings().cloned().collect(),
        })
    }

    /// Version `version`, or the active one; the active one says so when it is not in force.
    pub async fn get(&self, version: Option<i64>) -> Result<ConfigVersion, ServiceError> {
        let mut v = self.store.get(version).await?;
        let active = self.active();
        if let Some(held) = active.held_back.as_ref().filter(|h| h.stored_version == v.version) {
            v.not_in_force = Some(held.describe(active.version));
        }
        Ok(v)
    }

    /// A page of version summaries, newest first. `cursor` is a `next_cursor` from an
    /// earlier page.
    pub async fn list(&self, max_items: Option<i64>, cursor: Option<&str>) -> Result<VersionPage, ServiceError> {
        let limit = app::api::page_size(max_items, 10).map_err(ServiceError::BadRequest)?;
        let before = cursor.map(parse_cursor).transpose()?;
        let (versions, more) = self.store.list(before, limit).await?;
        let next_cursor = more.then(|| versions.last().map(|v| v.version.to_string())).flatten();
        Ok(VersionPage { versions, next_cursor })
    }

    /// Applies a copy of version `version` as a new version whose message says so.
    pub async fn rollback(&self, caller: &Caller, version: i64, meta: &ApplyMeta) -> Result<ApplyResponse, ServiceError> {
        caller.require(Role::Editor, "rolling back the config")?;
        let target = self.store.get(Some(version)).await?;
        let message = match &meta.message {
            Some(why) => format!("rollback to version {version}: {why}"),
            None => format!("rollback to version {version}"),
        };
        let meta = ApplyMeta { message: Some(message), creator_id: caller.user.clone(), rollback_of: Some(version), ..meta.clone() };
        self.store_version(&target.config, &meta).await
    }

    /// Structural and text diff from version `from` to version `to`. Defaults: `to` is the
    /// active version and `from` its predecessor.
    pub async fn diff(&self, from: Option<i64>, to: Option<i64>) -> Result<ConfigDiff, ServiceError> {
        let to = self.store.get(to).await?;
        let from_version = from.unwrap_or(to.version - 1);
        let from = match from_version {
            0 => None,
            v => Some(self.store.get(Some(v)).await?),
        };
        let empty = SchedulerConfig::default();
        let old = from.as_ref().map_or(&empty, |v| &v.config);
        Ok(diff_labeled(old, &to.config, &format!("version {from_version}"), &format!("version {}", to.version)))
    }
}

fn parse_cursor(cursor: &str) -> Result<i64, ServiceError> {
    cursor
        .parse::<i64>()
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| ServiceError::BadRequest(format!("cursor: `{cursor}` is not a cursor returned by this API")))
}

#[cfg(test)]
mod tests {
    use proptest::strategy::{Strategy, ValueTree};

    use super::*;
    use crate::engine::tests::compile::near_valid_config;
    use crate::state::{AppState, RuntimeOptions};
    use crate::store::Db;

    /// compiles ⇒ a server restarted on it starts: configs the generator makes that pass
    /// validation are applied on a fresh SQLite database, and a server starts on it with
    /// that version in force.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_restarted_on_any_applied_config_starts() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let caller = Caller::anonymous();
        let mut tried = 0;
        while tried < 12 {
            let cfg = near_valid_config().new_tree(&mut runner).expect("a tree").current();
            if validate(&cfg).has_errors() {
                continue;
            }
            tried += 1;
            let dir = std::env::temp_dir().join(crate::clock::new_id("berth_restart"));
            std::fs::create_dir_all(&dir).unwrap();
            let url = format!("sqlite://{}/berth.db", dir.display());
            let db = Db::connect(&url).await.unwrap();
            let service = ConfigService::start(ConfigStore::new(db.clone())).await.unwrap();
            let applied = service.apply(&caller, &cfg, &ApplyMeta::default()).await.unwrap_or_else(|e| panic!("{e}: {cfg:?}"));
            let restarted = AppState::start(db, RuntimeOptions::local(dir.join("data"))).await.unwrap_or_else(|e| panic!("{e:#}: {cfg:?}"));
            let active = restarted.config.active();
            assert_eq!((active.version, active.held_back.clone()), (applied.version, None), "{cfg:?}");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
