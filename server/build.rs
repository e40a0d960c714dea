//! Build-time inputs of the `berth` binary:
//! - the migrations (embedded by `sqlx::migrate!`): re-embedded whenever one changes;
//! - the dashboard's static files (`http/assets.rs` compiles them in with rust-embed): the
//!   directory `BERTH_EMBED_SITE_DIR`, else `$CARGO_TARGET_DIR/site` (where `make site`
//!   writes), passed on as `BERTH_EMBED_SITE`; an empty directory when it has no
//!   `pkg/manifest.json` yet, so a plain `cargo build` still works (that binary then needs
//!   `--site-root`);
//! - the commit it is built from (`berth version`), as `BERTH_COMMIT`.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
    embed_site();
    commit();
}

fn embed_site() {
    println!("cargo:rerun-if-env-changed=BERTH_EMBED_SITE_DIR");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("server/ is in the workspace").to_path_buf();
    let site = std::env::var_os("BERTH_EMBED_SITE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(|t| PathBuf::from(t).join("site")))
        // OUT_DIR is <target>/<profile>/build/<crate>-<hash>/out.
        .or_else(|| out.ancestors().nth(4).map(|t| t.join("site")))
        .map(|p| if p.is_absolute() { p } else { workspace.join(p) })
        .unwrap_or_default();
    let pkg = site.join("pkg");
    // Rebuilt when `make site` writes the files (cargo scans a directory). A path that does
    // not exist would rerun this script, and rebuild the crate, on every build: watch the
    // nearest one that does.
    if let Some(watched) = pkg.ancestors().find(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", watched.display());
    }
    let dir = if pkg.join("manifest.json").is_file() {
        site
    } else {
        println!(
            "cargo:warning=no dashboard assets in {}: this berth serves the dashboard only with --site-root (run `make site` before building to embed them)",
            pkg.display()
        );
        let empty = out.join("no-site");
        std::fs::create_dir_all(&empty).expect("OUT_DIR is writable");
        empty
    };
    println!("cargo:rustc-env=BERTH_EMBED_SITE={}", dir.display());
}

fn commit() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BERTH_COMMIT={commit}");
    // A new commit moves HEAD or the branch it names (a loose ref, else packed-refs).
    let refs = [git(&["rev-parse", "--git-path", "HEAD"]), git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])), git(&["rev-parse", "--git-path", "packed-refs"])];
    for path in refs.into_iter().flatten().filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}
