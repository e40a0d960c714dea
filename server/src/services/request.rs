//! A job request at the edge: the shared field checks (`app::request`), its resources as the
//! engine counts them, and where its working directory may be.

use app::jobs::JobRequest;

use crate::engine::{Milli, Name, Resources};

pub use app::request::MAX_RETRIES;

/// Ok when `dir` lies inside one of `roots` (all of them are allowed when `roots` is empty).
/// Symbolic links and `..` are resolved first, so neither can lead out of a root.
pub fn workdir_allowed(roots: &[std::path::PathBuf], dir: &str) -> Result<(), String> {
    if roots.is_empty() {
        return Ok(());
    }
    let path = std::path::Path::new(dir);
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| lexically_normal(path));
    if roots.iter().any(|root| resolved.starts_with(std::fs::canonicalize(root).unwrap_or_else(|_| root.clone()))) {
        return Ok(());
    }
    let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    Err(format!("runtime_env.working_dir: `{dir}` is outside the allowed roots ({}); the server's --workdir-root sets them", list.join(", ")))
}

/// `path` with `.` and `..` taken out, for a path that does not exist (yet).
fn lexically_normal(path: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Checks `req` (the checks the submit page runs too, see `app::request`) and returns its
/// resources as the engine counts them, or `field: problem`.
pub fn check(req: &JobRequest) -> Result<Resources, String> {
    app::request::check(req).map_err(|p| p.to_string())?;
    let pairs = req.resources.iter().map(|(name, amount)| (shared_name(name), Milli::from_f64(amount).unwrap_or(Milli::ZERO)));
    Ok(Resources::new(pairs.collect::<Vec<(Name, Milli)>>()))
}

/// A resource's name; the standard ones are one allocation shared by every request, which
/// lets the engine match them by address (see `engine::state`).
fn shared_name(name: &str) -> Name {
    static STANDARD: std::sync::OnceLock<[Name; 3]> = std::sync::OnceLock::new();
    let standard = STANDARD.get_or_init(|| ["cpu".into(), "gpu".into(), "memory_gb".into()]);
    standard.iter().find(|n| &***n == name).cloned().unwrap_or_else(|| name.into())
}

/// The name shown when a request gives none: the entrypoint's first word, without its path.
pub fn default_name(entrypoint: &str) -> String {
    let first = entrypoint.split_whitespace().next().unwrap_or("job");
    let base = first.rsplit('/').next().unwrap_or(first);
    base.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(entry: &str) -> JobRequest {
        JobRequest { entrypoint: entry.into(), ..Default::default() }
    }

    #[test]
    fn resources_become_milli_units() {
        let mut r = req("true");
        r.resources.cpu = Some(1.5);
        r.resources.memory_gb = Some(0.0);
        r.resources.custom.insert("accel".into(), 2.0);
        assert_eq!(check(&r).unwrap().to_string(), "accel 2, cpu 1.5");
    }

    #[test]
    fn default_names_come_from_the_entrypoint() {
        assert_eq!(default_name("/usr/bin/python3 train.py --lr 1"), "python3");
        assert_eq!(default_name(""), "job");
    }

    #[test]
    fn working_dirs_stay_inside_their_roots() {
        let root = std::env::temp_dir().join(format!("berth-roots-{}", std::process::id()));
        std::fs::create_dir_all(root.join("a")).unwrap();
        let roots = vec![root.clone()];
        assert!(workdir_allowed(&roots, &root.join("a").display().to_string()).is_ok());
        assert!(workdir_allowed(&roots, &root.join("not/yet").display().to_string()).is_ok());
        let escape = format!("{}/a/../../etc", root.display());
        let err = workdir_allowed(&roots, &escape).unwrap_err();
        assert!(err.starts_with("runtime_env.working_dir:") && err.contains("outside the allowed roots"), "{err}");
        assert!(workdir_allowed(&roots, "/etc").is_err());
        // A link inside the root that points out of it is outside.
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        assert!(workdir_allowed(&roots, &root.join("link").display().to_string()).is_err());
        assert!(workdir_allowed(&[], "/etc").is_ok());
        let _ = std::fs::remove_dir_all(root);
    }
}
