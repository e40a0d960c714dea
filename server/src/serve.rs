//! `berth serve`: open the database, build the router, listen until Ctrl-C or SIGTERM.

use std::path::PathBuf;

use anyhow::{Context, Result};
use leptos::config::{Env, LeptosOptions};

use crate::cli::ServeArgs;
use crate::db::{redact_url, Db};
use crate::state::AppState;

/// Runs the server until it is asked to stop.
pub async fn serve(args: &ServeArgs) -> Result<()> {
    let db = Db::connect(&args.database_url)
        .await
        .with_context(|| format!("database {}", redact_url(&args.database_url)))?;
    let state = AppState::new(db).await.context("cannot prepare the config store")?;
    let site_root = args.site_root.clone().unwrap_or_else(default_site_root);
    if !site_root.join("pkg").is_dir() {
        tracing::warn!(site_root = %site_root.display(), "no dashboard assets found; build them with `make build`");
    }
    let leptos = LeptosOptions::builder()
        .output_name("berth")
        .site_root(site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(args.addr)
        .env(Env::PROD)
        .build();
    let app = crate::http::router(state, leptos);
    let listener = tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("cannot listen on {}", args.addr))?;
    tracing::info!(addr = %args.addr, database = %redact_url(&args.database_url), "berth is serving on http://{}", args.addr);
    axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await?;
    Ok(())
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
