//! Uploaded packages on this host: a run's `working_dir` package is unpacked into the run's
//! own directory, which becomes its working directory (as Ray unpacks it into the job's);
//! each `py_modules` package into `runs/{key}.py_modules/`, put on `PYTHONPATH`.
//!
//! And what a run's `runtime_env` asks that a plain process cannot give: installing
//! software (`pip`, `conda`, …) or a container. Such a job is refused with the key named.

use app::jobs::RuntimeEnv;

use super::*;

/// `runtime_env` keys the local backend cannot honour, and what each would need.
const UNSUPPORTED: [(&str, &str); 9] = [
    ("pip", "installing pip packages"),
    ("uv", "installing packages with uv"),
    ("conda", "a conda environment"),
    ("container", "a container"),
    ("image_uri", "a container image"),
    ("java_jars", "Java jars on a Ray worker"),
    ("mpi", "MPI workers"),
    ("nsight", "Nsight profiling of Ray workers"),
    ("rocprof_sys", "ROCm profiling of Ray workers"),
];

/// Why the local backend cannot run a job with `env`, if it cannot.
pub(super) fn refusal(env: &RuntimeEnv) -> Option<String> {
    if let Some((key, need)) = UNSUPPORTED.iter().find(|(k, _)| env.other.contains_key(*k)) {
        return Some(format!(
            "runtime_env.{key}: the local backend cannot honour it ({need}): it runs the entrypoint as a plain process on \
             the server's host and installs nothing; route the job to a Ray flavor, or leave `{key}` out"
        ));
    }
    if let Some(dir) = env.working_dir.as_deref().filter(|d| app::request::is_uri(d) && app::request::package_name(d).is_none()) {
        return Some(format!(
            "runtime_env.working_dir: the local backend cannot fetch `{dir}`; upload a directory (`ray job submit --working-dir DIR`) or name a directory on the server"
        ));
    }
    let modules = env.other.get("py_modules");
    let listed = modules.and_then(|m| m.as_array());
    if modules.is_some() && listed.is_none() {
        return Some("runtime_env.py_modules: must be a list".into());
    }
    if let Some(m) = listed.into_iter().flatten().find(|m| m.as_str().and_then(app::request::package_name).is_none()) {
        return Some(format!("runtime_env.py_modules: the local backend takes uploaded packages only (Ray's client uploads local directories), not {m}"));
    }
    None
}

impl LocalBackend {
    /// Unpacks the run's packages (on the blocking pool) and returns the spec to start: its
    /// working directory the run's own, `PYTHONPATH` with its modules first.
    pub(super) async fn unpack(&self, mut spec: StartSpec, env: RuntimeEnv) -> Result<StartSpec, BackendError> {
        let paths = self.paths(&spec.run);
        let key = spec.run.key();
        let modules_dir = self.runs_dir().join(format!("{key}.py_modules"));
        let work_package = env.working_dir.as_deref().and_then(|d| spec.package(d)).map(|p| p.path.clone());
        let listed = env.other.get("py_modules").and_then(|m| m.as_array()).into_iter().flatten().filter_map(|m| m.as_str());
        let modules: Vec<(String, PathBuf)> = listed
            .filter_map(|uri| Some((app::request::package_name(uri)?.trim_end_matches(".zip").to_string(), spec.package(uri)?.path.clone())))
            .collect();
        let work = paths.work.clone();
        let dirs = tokio::task::spawn_blocking(move || -> Result<Vec<PathBuf>, String> {
            if let Some(zip) = work_package {
                unpack_file(&zip, &work)?;
            }
            let mut dirs = Vec::new();
            for (stem, zip) in modules {
                let dir = modules_dir.join(stem);
                unpack_file(&zip, &dir)?;
                dirs.push(dir);
            }
            Ok(dirs)
        })
        .await
        .map_err(|e| BackendError::Failed(format!("run {key}: unpacking its packages: {e}")))?
        .map_err(|e| BackendError::Failed(format!("run {key}: {e}")))?;
        if work_package_named(&env) {
            spec.working_dir = None; // the run's own directory, where the package now is
        }
        if !dirs.is_empty() {
            let mut path: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            let before = spec.env_vars.get("PYTHONPATH").cloned().or_else(|| std::env::var("PYTHONPATH").ok());
            path.extend(before.filter(|p| !p.is_empty()));
            spec.env_vars.insert("PYTHONPATH".into(), path.join(":"));
        }
        Ok(spec)
    }
}

fn work_package_named(env: &RuntimeEnv) -> bool {
    env.working_dir.as_deref().and_then(app::request::package_name).is_some()
}

fn unpack_file(zip: &Path, into: &Path) -> Result<(), String> {
    let bytes = fs::read(zip).map_err(|e| format!("reading package {}: {e} (removed while the job waited?)", zip.display()))?;
    crate::zipfile::unpack(&bytes, into).map_err(|e| format!("unpacking {}: {e}", zip.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(json: serde_json::Value) -> RuntimeEnv {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn what_a_plain_process_cannot_give_is_refused_by_name() {
        assert_eq!(refusal(&env(serde_json::json!({"working_dir": "gcs://_ray_pkg_ab.zip", "env_vars": {"A": "1"}}))), None);
        let pip = refusal(&env(serde_json::json!({"pip": ["requests"]}))).unwrap();
        assert!(pip.starts_with("runtime_env.pip: the local backend cannot honour it"), "{pip}");
        let conda = refusal(&env(serde_json::json!({"conda": "env"}))).unwrap();
        assert!(conda.starts_with("runtime_env.conda"), "{conda}");
        let remote = refusal(&env(serde_json::json!({"working_dir": "s3://bucket/x.zip"}))).unwrap();
        assert!(remote.contains("cannot fetch `s3://bucket/x.zip`"), "{remote}");
        let module = refusal(&env(serde_json::json!({"py_modules": ["gcs://_ray_pkg_01.zip", "https://x/m.whl"]}))).unwrap();
        assert!(module.contains("https://x/m.whl"), "{module}");
        // Keys Ray ignores, or that only matter inside Ray, pass.
        assert_eq!(refusal(&env(serde_json::json!({"excludes": ["*.log"], "config": {"setup_timeout_seconds": 60}}))), None);
    }
}
