//! `berth serve`: open the database, build the router, listen until Ctrl-C or SIGTERM.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use leptos::config::{Env, LeptosOptions};

use crate::cli::ServeArgs;
use crate::http::Assets;
use crate::store::{redact_url, Db};
use crate::engine::{Milli, Resources};
use crate::backends::ray::RayConfig;
use crate::backends::slurm::SlurmConfig;
use crate::state::{AppState, RuntimeOptions};

/// Runs the server until it is asked to stop.
pub async fn serve(args: &ServeArgs) -> Result<()> {
    // Held until the process ends: a second server on the same SQLite file is refused.
    let _sqlite = crate::store::lock_sqlite(&args.database_url)?;
    let db = Db::connect(&args.database_url)
        .await
        .with_context(|| format!("database {}", redact_url(&args.database_url)))?;
    let mut options = runtime_options(args)?;
    if db.kind == crate::store::DbKind::Postgres {
        options.replica = Some(replica_options(args)?);
    }
    let state = AppState::start(db, options).await?;
    // The files compiled into the binary, unless a site root is named (a fresh frontend
    // build in development) or the binary was built without them.
    let assets = match (&args.site_root, crate::http::assets::embedded()) {
        (None, true) => Assets::Embedded,
        _ => Assets::SiteRoot,
    };
    let site_root = args.site_root.clone().unwrap_or_else(default_site_root);
    if assets == Assets::SiteRoot && !site_root.join("pkg").is_dir() {
        tracing::warn!(site_root = %site_root.display(), "no dashboard assets found (this binary has none built in); build them with `make build`");
    }
    let leptos = LeptosOptions::builder()
        .output_name("berth")
        .site_root(site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(args.addr)
        .env(Env::PROD)
        .build();
    match state.runtime.lease() {
        Some(lease) => tracing::info!(replica = %lease.name, "one of the replicas on this PostgreSQL database; the one holding the leader lease runs the admission loop"),
        // The only process runs the admission loop, so it leads.
        None => state.runtime.metrics().leader.with_label_values(&[&args.addr.to_string()]).set(1),
    }
    let lease = state.runtime.lease().cloned();
    let shutdown = state.shutdown.clone();
    let app = crate::http::router_serving(state, leptos, assets);
    let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("cannot listen on {}", args.addr))?;
    tracing::info!(addr = %args.addr, database = %redact_url(&args.database_url), anonymous = args.anonymous, dashboard_files = ?assets, "berth is serving on http://{}", args.addr);
    let stopping = async move {
        shutdown_signal().await;
        shutdown.send_replace(true);
    };
    // The peer address is what sign-in attempts are counted by.
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app).with_graceful_shutdown(stopping).await?;
    if let Some(lease) = lease {
        // Another replica takes over now rather than when the lease lapses.
        lease.release().await;
    }
    Ok(())
}

/// This replica's name and lease (several `berth serve` on one PostgreSQL database).
fn replica_options(args: &ServeArgs) -> Result<crate::replicas::ReplicaOptions> {
    if !(500..=600_000).contains(&args.lease_ms) {
        bail!("--lease-ms: must be between 500 and 600000, got {}", args.lease_ms);
    }
    let name = match &args.replica_name {
        Some(n) if n.trim().is_empty() => bail!("--replica-name: must not be empty"),
        Some(n) => n.trim().to_string(),
        None => format!("{}:{}", crate::backends::local::hostname(), args.addr.port()),
    };
    Ok(crate::replicas::ReplicaOptions { name, url: args.database_url.clone(), lease: std::time::Duration::from_millis(args.lease_ms) })
}

/// The runtime's settings and the local backend, from the command line.
pub fn runtime_options(args: &ServeArgs) -> Result<RuntimeOptions> {
    let mut options = RuntimeOptions::local(args.data_dir.clone());
    if args.anonymous && !args.addr.ip().is_loopback() {
        bail!(
            "--anonymous: refused on {}: anonymous mode lets anyone who can connect act as an admin, so it is only allowed on a loopback address (127.0.0.1, ::1); use API tokens instead",
            args.addr
        );
    }
    options.access = crate::state::Access {
        anonymous: args.anonymous,
        admin_token: std::env::var("BERTH_ADMIN_TOKEN").ok().filter(|t| !t.trim().is_empty()),
        secure_cookies: args.secure_cookies,
    };
    options.settings.workdir_roots = workdir_roots(args)?;
    let ms = std::time::Duration::from_millis;
    options.settings.tick = ms(args.tick_ms.max(10));
    options.settings.retry_backoff = ms(args.retry_backoff_ms);
    options.settings.sample_interval = std::time::Duration::from_secs(args.sample_interval_s.max(1));
    options.settings.history_retention = std::time::Duration::from_secs(args.history_days.max(1) * 24 * 3600);
    options.ray = ray_configs(args)?;
    options.slurm = slurm_configs(args)?;
    if args.package_max_mb == 0 {
        bail!("--package-max-mb: must be at least 1");
    }
    options.packages.max_bytes = args.package_max_mb.saturating_mul(1024 * 1024);
    options.packages.keep_unused = std::time::Duration::from_secs(args.package_keep_hours.max(1).saturating_mul(3600));
    if args.no_local {
        options.local = None;
        return Ok(options);
    }
    let Some(local) = options.local.as_mut() else { return Ok(options) };
    if !(args.kill_grace_s.is_finite() && (0.0..=3600.0).contains(&args.kill_grace_s)) {
        bail!("--kill-grace-s: must be between 0 and 3600 seconds, got {}", args.kill_grace_s);
    }
    local.kill_grace = std::time::Duration::from_secs_f64(args.kill_grace_s);
    local.simulate = args.simulate;
    if let Some(node) = &args.local_node {
        if node.trim().is_empty() || node.chars().any(char::is_whitespace) {
            bail!("--local-node: `{node}` is not a valid node name (no spaces, not empty)");
        }
        local.node_id = node.clone();
    }
    local.workdir_roots = options.settings.workdir_roots.clone();
    let mut resources: Vec<(String, f64)> = local.capacity.iter().map(|(n, m)| (n.to_string(), m.as_f64())).collect();
    let mut set = |name: &str, amount: f64, flag: &str| -> Result<()> {
        if !(amount.is_finite() && amount >= 0.0) {
            bail!("{flag}: must be a number >= 0, got {amount}");
        }
        resources.retain(|(n, _)| n != name);
        resources.push((name.to_string(), amount));
        Ok(())
    };
    if let Some(c) = args.local_cpus {
        set("cpu", c, "--local-cpus")?;
    }
    if let Some(m) = args.local_memory_gb {
        set("memory_gb", m, "--local-memory-gb")?;
    }
    if let Some(g) = args.local_gpus {
        set("gpu", g, "--local-gpus")?;
    }
    for raw in &args.local_resources {
        let (name, amount) = raw.split_once('=').with_context(|| format!("--local-resource: `{raw}` is not NAME=AMOUNT"))?;
        let amount: f64 = amount.trim().parse().map_err(|_| anyhow!("--local-resource: `{raw}`: `{amount}` is not a number"))?;
        if name.trim().is_empty() || name.trim().chars().any(char::is_whitespace) {
            bail!("--local-resource: `{name}` is not a valid resource name");
        }
        set(name.trim(), amount, "--local-resource")?;
    }
    let mut pairs = Vec::with_capacity(resources.len());
    for (name, amount) in resources {
        let milli = Milli::from_f64(amount).ok_or_else(|| anyhow!("local resource {name}: {amount} is out of range"))?;
        pairs.push((name, milli));
    }
    local.capacity = Resources::new(pairs);
    for raw in &args.local_labels {
        let (k, v) = raw.split_once('=').with_context(|| format!("--local-label: `{raw}` is not KEY=VALUE"))?;
        if k.trim().is_empty() {
            bail!("--local-label: `{raw}` has an empty key");
        }
        local.labels.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(options)
}

/// `--workdir-root` directories (absolute), or the home and temp directories; `/` means any.
fn workdir_roots(args: &ServeArgs) -> Result<Vec<PathBuf>> {
    let mut roots = args.workdir_roots.clone();
    if roots.is_empty() {
        roots.extend(std::env::var_os("HOME").map(PathBuf::from));
        roots.push(std::env::temp_dir());
    }
    for root in &roots {
        if !root.is_absolute() {
            bail!("--workdir-root: `{}` must be an absolute path", root.display());
        }
    }
    if roots.iter().any(|r| r == std::path::Path::new("/")) {
        return Ok(Vec::new());
    }
    Ok(roots)
}

/// The Ray clusters of `--ray NAME=URL`, with their tokens and limits.
fn ray_configs(args: &ServeArgs) -> Result<Vec<RayConfig>> {
    let mut tokens = std::collections::BTreeMap::new();
    for raw in &args.ray_tokens {
        let (name, token) = raw.split_once('=').with_context(|| "--ray-token: expected NAME=TOKEN".to_string())?;
        tokens.insert(name.trim().to_string(), token.trim().to_string());
    }
    if args.ray_max_in_flight == 0 {
        bail!("--ray-max-in-flight: must be at least 1");
    }
    if let Some(url) = &args.ray_callback_url {
        let parsed = reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("--ray-callback-url: `{url}` is not a URL ({e})"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            bail!("--ray-callback-url: `{url}` is not an http:// or https:// URL of this server");
        }
    }
    let mut out: Vec<RayConfig> = Vec::new();
    for raw in &args.ray {
        let (name, url) = raw.split_once('=').with_context(|| format!("--ray: `{raw}` is not NAME=URL"))?;
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            bail!("--ray: `{name}` is not a valid backend name (letters, digits, `-`, `_`)");
        }
        if out.iter().any(|c| c.name == name) || (name == "local" && !args.no_local) {
            bail!("--ray: backend `{name}` is configured twice");
        }
        let mut cfg = RayConfig::new(name, url.trim());
        let env = format!("BERTH_RAY_TOKEN_{}", name.to_ascii_uppercase().replace('-', "_"));
        cfg.token = tokens.remove(name).or_else(|| std::env::var(&env).ok()).filter(|t| !t.is_empty());
        cfg.max_in_flight = args.ray_max_in_flight;
        cfg.poll_interval = std::time::Duration::from_millis(args.ray_poll_ms.max(50));
        cfg.nodes_interval = std::time::Duration::from_millis(args.ray_nodes_ms.max(500));
        cfg.callback_url = args.ray_callback_url.clone();
        if !args.ray_keep_finished {
            cfg.keep_dir = Some(std::path::absolute(&args.data_dir).with_context(|| format!("--data-dir `{}`", args.data_dir.display()))?);
        }
        out.push(cfg);
    }
    if let Some(name) = tokens.keys().next() {
        bail!("--ray-token: no `--ray {name}=URL` to go with it");
    }
    Ok(out)
}

/// The Slurm clusters of `--slurm NAME=SLURM_CONF`, with their limits.
fn slurm_configs(args: &ServeArgs) -> Result<Vec<SlurmConfig>> {
    if args.slurm_max_in_flight == 0 {
        bail!("--slurm-max-in-flight: must be at least 1");
    }
    let root = match &args.slurm_run_dir {
        Some(dir) => dir.clone(),
        None => args.data_dir.join("slurm"),
    };
    let root = std::path::absolute(&root).with_context(|| format!("--slurm-run-dir `{}`", root.display()))?;
    let mut out: Vec<SlurmConfig> = Vec::new();
    for raw in &args.slurm {
        let (name, conf) = raw.split_once('=').with_context(|| format!("--slurm: `{raw}` is not NAME=SLURM_CONF"))?;
        let name = name.trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            bail!("--slurm: `{name}` is not a valid backend name (letters, digits, `-`, `_`)");
        }
        let taken = out.iter().any(|c| c.name == name) || (name == "local" && !args.no_local) || args.ray.iter().any(|r| r.split_once('=').is_some_and(|(n, _)| n.trim() == name));
        if taken {
            bail!("--slurm: backend `{name}` is configured twice");
        }
        let conf = conf.trim();
        let conf = (!conf.is_empty()).then(|| PathBuf::from(conf));
        if let Some(c) = conf.as_ref().filter(|c| !c.is_file()) {
            bail!("--slurm: `{}` (cluster `{name}`) is not a file", c.display());
        }
        let mut cfg = SlurmConfig::new(name, conf, root.join(name));
        cfg.max_in_flight = args.slurm_max_in_flight;
        cfg.poll_interval = std::time::Duration::from_millis(args.slurm_poll_ms.max(50));
        cfg.nodes_interval = std::time::Duration::from_millis(args.slurm_nodes_ms.max(500));
        cfg.arrays = args.slurm_arrays;
        out.push(cfg);
    }
    Ok(out)
}

/// `site/` beside the build profile directory the binary runs from (…/target/site), else
/// ./target/site.
fn default_site_root() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("site")))
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| PathBuf::from("target/site"))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}
