//! Checks a job request at the edge: every field's bounds, with the field's name in the error.

use app::jobs::JobRequest;

use crate::engine::{Milli, Name, Resources};

/// Longest accepted name, label key or value, env var name.
const MAX_NAME: usize = 256;
/// Longest entrypoint or env var value.
const MAX_TEXT: usize = 64 * 1024;
/// Largest amount of one resource (a sanity bound, far above any machine).
const MAX_AMOUNT: f64 = 1e9;
/// Longest timeout: a year.
const MAX_TIMEOUT_S: u64 = 366 * 24 * 3600;
/// Most retries.
pub const MAX_RETRIES: u32 = 100;

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

/// Checks `req` and returns its resources as the engine counts them, or `field: problem`.
pub fn check(req: &JobRequest) -> Result<Resources, String> {
    if req.entrypoint.trim().is_empty() {
        return Err("entrypoint: must not be empty".into());
    }
    text("entrypoint", &req.entrypoint, MAX_TEXT)?;
    if let Some(name) = &req.name {
        text("name", name, MAX_NAME)?;
    }
    for (k, v) in &req.labels {
        if k.is_empty() {
            return Err("labels: a label key must not be empty".into());
        }
        text(&format!("labels.{k}"), k, MAX_NAME)?;
        text(&format!("labels.{k}"), v, MAX_NAME)?;
    }
    for (k, v) in &req.runtime_env.env_vars {
        let path = format!("runtime_env.env_vars.{k}");
        if k.is_empty() || k.contains('=') || k.contains('\0') || k.len() > MAX_NAME {
            return Err(format!("{path}: not a valid environment variable name"));
        }
        text(&path, v, MAX_TEXT)?;
    }
    if let Some(dir) = &req.runtime_env.working_dir {
        text("runtime_env.working_dir", dir, 4096)?;
        if !dir.starts_with('/') {
            return Err(format!("runtime_env.working_dir: must be an absolute path, got `{dir}`"));
        }
    }
    if req.timeout_s > MAX_TIMEOUT_S {
        return Err(format!("timeout_s: at most {MAX_TIMEOUT_S} (a year), got {}", req.timeout_s));
    }
    if req.max_retries > MAX_RETRIES {
        return Err(format!("max_retries: at most {MAX_RETRIES}, got {}", req.max_retries));
    }
    for (i, out) in req.outputs.iter().enumerate() {
        if out.is_empty() || out.starts_with('/') || out.split('/').any(|part| part == "..") {
            return Err(format!("outputs[{i}]: must be a relative path inside the working directory, got `{out}`"));
        }
        text(&format!("outputs[{i}]"), out, 4096)?;
    }
    let mut pairs = Vec::new();
    for (name, amount) in req.resources.iter() {
        let path = match name {
            "cpu" | "gpu" | "memory_gb" => format!("resources.{name}"),
            _ => format!("resources.custom.{name}"),
        };
        if name.is_empty() || name.len() > MAX_NAME {
            return Err("resources.custom: a resource name must be 1 to 256 characters".into());
        }
        if !amount.is_finite() || amount < 0.0 {
            return Err(format!("{path}: must be a number ≥ 0, got {amount}"));
        }
        if amount > MAX_AMOUNT {
            return Err(format!("{path}: at most {MAX_AMOUNT}, got {amount}"));
        }
        pairs.push((shared_name(name), Milli::from_f64(amount).unwrap_or(Milli::ZERO)));
    }
    Ok(Resources::new(pairs))
}

/// A resource's name; the standard ones are one allocation shared by every request, which
/// lets the engine match them by address (see `engine::state`).
fn shared_name(name: &str) -> Name {
    static STANDARD: std::sync::OnceLock<[Name; 3]> = std::sync::OnceLock::new();
    let standard = STANDARD.get_or_init(|| ["cpu".into(), "gpu".into(), "memory_gb".into()]);
    standard.iter().find(|n| &***n == name).cloned().unwrap_or_else(|| name.into())
}

fn text(path: &str, s: &str, max: usize) -> Result<(), String> {
    if s.contains('\0') {
        return Err(format!("{path}: must not contain a NUL character"));
    }
    if s.len() > max {
        return Err(format!("{path}: at most {max} bytes, got {}", s.len()));
    }
    Ok(())
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
    fn errors_name_the_field() {
        let mut r = req("true");
        r.resources.cpu = Some(-1.0);
        assert_eq!(check(&r).unwrap_err(), "resources.cpu: must be a number ≥ 0, got -1");
        let mut r = req("true");
        r.resources.custom.insert("tpu".into(), f64::NAN);
        assert!(check(&r).unwrap_err().starts_with("resources.custom.tpu:"));
        assert_eq!(check(&req("  ")).unwrap_err(), "entrypoint: must not be empty");
        let mut r = req("true");
        r.runtime_env.working_dir = Some("rel/dir".into());
        assert!(check(&r).unwrap_err().starts_with("runtime_env.working_dir:"));
        let mut r = req("true");
        r.outputs = vec!["../etc/passwd".into()];
        assert!(check(&r).unwrap_err().starts_with("outputs[0]:"));
        let mut r = req("true");
        r.max_retries = 1000;
        assert!(check(&r).unwrap_err().starts_with("max_retries:"));
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
