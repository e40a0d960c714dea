//! The checks every job request passes, wherever it is typed: the server runs them on each
//! submission and the submit page runs the same code in the browser as the fields are
//! typed. Each problem names the field by its path in the request.

use crate::jobs::JobRequest;

/// Longest accepted name, label key or value, env var name.
pub const MAX_NAME: usize = 256;
/// Longest entrypoint or env var value.
pub const MAX_TEXT: usize = 64 * 1024;
/// Longest path (working directory, output).
pub const MAX_PATH: usize = 4096;
/// Largest amount of one resource (a sanity bound, far above any machine).
pub const MAX_AMOUNT: f64 = 1e9;
/// Longest timeout: a year.
pub const MAX_TIMEOUT_S: u64 = 366 * 24 * 3600;
/// Most retries.
pub const MAX_RETRIES: u32 = 100;
/// Longest submission id.
pub const MAX_SUBMISSION_ID: usize = 128;

/// The package name of a URI of a package uploaded to Berth (`gcs://_ray_pkg_<hex>.zip`,
/// as Ray's clients name them), or `None` for anything else.
pub fn package_name(uri: &str) -> Option<&str> {
    let name = uri.strip_prefix("gcs://")?;
    let hex = name.strip_prefix("_ray_pkg_")?.strip_suffix(".zip")?;
    (!hex.is_empty() && hex.len() <= 128 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(name)
}

/// The names of the uploaded packages `env` uses: its working directory and its `py_modules`.
pub fn packages(env: &crate::jobs::RuntimeEnv) -> Vec<&str> {
    let modules = env.other.get("py_modules").and_then(|m| m.as_array()).into_iter().flatten().filter_map(|m| m.as_str());
    env.working_dir.as_deref().into_iter().chain(modules).filter_map(package_name).collect()
}

/// Whether `s` is a URI (`scheme://…`) rather than a path.
pub fn is_uri(s: &str) -> bool {
    s.split_once("://").is_some_and(|(scheme, _)| !scheme.is_empty() && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+'))
}

/// One thing wrong with a request: the field's path (`resources.cpu`, `labels.team`,
/// `runtime_env.env_vars.HOME`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The first problem of `req`, if any.
pub fn check(req: &JobRequest) -> Result<(), Problem> {
    match problems(req).into_iter().next() {
        Some(p) => Err(p),
        None => Ok(()),
    }
}

/// Every problem of `req`, in field order.
pub fn problems(req: &JobRequest) -> Vec<Problem> {
    let mut out = Problems(Vec::new());
    if req.entrypoint.trim().is_empty() {
        out.add("entrypoint", "must not be empty".into());
    }
    out.text("entrypoint", &req.entrypoint, MAX_TEXT);
    if let Some(name) = &req.name {
        out.text("name", name, MAX_NAME);
    }
    if let Some(id) = &req.submission_id {
        if id.is_empty() || id.len() > MAX_SUBMISSION_ID {
            out.add("submission_id", format!("must be 1 to {MAX_SUBMISSION_ID} characters, got {}", id.len()));
        } else if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))) {
            out.add("submission_id", format!("only letters, digits, `_`, `-` and `.` are allowed, got {c:?} in `{id}`"));
        }
    }
    for (k, v) in &req.labels {
        if k.is_empty() {
            out.add("labels", "a label key must not be empty".into());
        }
        out.text(&format!("labels.{k}"), k, MAX_NAME);
        out.text(&format!("labels.{k}"), v, MAX_NAME);
    }
    for (k, v) in &req.runtime_env.env_vars {
        let path = format!("runtime_env.env_vars.{k}");
        if k.is_empty() || k.contains('=') || k.contains('\0') || k.len() > MAX_NAME {
            out.add(&path, "not a valid environment variable name".into());
        }
        out.text(&path, v, MAX_TEXT);
    }
    if let Some(dir) = &req.runtime_env.working_dir {
        out.text("runtime_env.working_dir", dir, MAX_PATH);
        if dir.starts_with("gcs://") && package_name(dir).is_none() {
            out.add("runtime_env.working_dir", format!("`{dir}` is not a package URI like gcs://_ray_pkg_<hex>.zip"));
        } else if !dir.starts_with('/') && !is_uri(dir) {
            out.add("runtime_env.working_dir", format!("must be an absolute path or a package URI, got `{dir}`"));
        }
    }
    if req.timeout_s > MAX_TIMEOUT_S {
        out.add("timeout_s", format!("at most {MAX_TIMEOUT_S} (a year), got {}", req.timeout_s));
    }
    if req.max_retries > MAX_RETRIES {
        out.add("max_retries", format!("at most {MAX_RETRIES}, got {}", req.max_retries));
    }
    for (i, o) in req.outputs.iter().enumerate() {
        let path = format!("outputs[{i}]");
        if o.is_empty() || o.starts_with('/') || o.split('/').any(|part| part == "..") {
            out.add(&path, format!("must be a relative path inside the working directory, got `{o}`"));
        }
        out.text(&path, o, MAX_PATH);
    }
    for (name, amount) in req.resources.iter() {
        let path = match name {
            "cpu" | "gpu" | "memory_gb" => format!("resources.{name}"),
            _ => format!("resources.custom.{name}"),
        };
        if name.is_empty() || name.len() > MAX_NAME {
            out.add("resources.custom", "a resource name must be 1 to 256 characters".into());
        } else if !amount.is_finite() || amount < 0.0 {
            out.add(&path, format!("must be a number ≥ 0, got {amount}"));
        } else if amount > MAX_AMOUNT {
            out.add(&path, format!("at most {MAX_AMOUNT}, got {amount}"));
        }
    }
    out.0
}

struct Problems(Vec<Problem>);

impl Problems {
    fn add(&mut self, field: &str, message: String) {
        self.0.push(Problem { field: field.into(), message });
    }

    fn text(&mut self, field: &str, s: &str, max: usize) {
        if s.contains('\0') {
            self.add(field, "must not contain a NUL character".into());
        }
        if s.len() > max {
            self.add(field, format!("at most {max} bytes, got {}", s.len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(entry: &str) -> JobRequest {
        JobRequest { entrypoint: entry.into(), ..Default::default() }
    }

    #[test]
    fn submission_ids_and_package_uris_are_checked() {
        let mut r = req("true");
        r.submission_id = Some("raysubmit_4LamXRuQ-1.b".into());
        assert_eq!(check(&r), Ok(()));
        r.submission_id = Some("a/b".into());
        assert_eq!(check(&r).unwrap_err().to_string(), "submission_id: only letters, digits, `_`, `-` and `.` are allowed, got '/' in `a/b`");
        r.submission_id = Some(String::new());
        assert_eq!(check(&r).unwrap_err().field, "submission_id");
        let mut r = req("true");
        r.runtime_env.working_dir = Some("gcs://_ray_pkg_0af3.zip".into());
        assert_eq!(check(&r), Ok(()));
        r.runtime_env.other.insert("py_modules".into(), serde_json::json!(["gcs://_ray_pkg_11.zip", "s3://b/m.zip"]));
        assert_eq!(packages(&r.runtime_env), ["_ray_pkg_0af3.zip", "_ray_pkg_11.zip"]);
        r.runtime_env.working_dir = Some("gcs://../../etc.zip".into());
        assert!(check(&r).unwrap_err().message.contains("not a package URI"));
        r.runtime_env.working_dir = Some("s3://bucket/dir.zip".into());
        assert_eq!(check(&r), Ok(()));
    }

    #[test]
    fn problems_name_the_field() {
        let mut r = req("true");
        r.resources.cpu = Some(-1.0);
        assert_eq!(check(&r).unwrap_err().to_string(), "resources.cpu: must be a number ≥ 0, got -1");
        let mut r = req("true");
        r.resources.custom.insert("tpu".into(), f64::NAN);
        assert_eq!(check(&r).unwrap_err().field, "resources.custom.tpu");
        assert_eq!(check(&req("  ")).unwrap_err().to_string(), "entrypoint: must not be empty");
        let mut r = req("true");
        r.runtime_env.working_dir = Some("rel/dir".into());
        assert_eq!(check(&r).unwrap_err().field, "runtime_env.working_dir");
        let mut r = req("true");
        r.outputs = vec!["../etc/passwd".into()];
        assert_eq!(check(&r).unwrap_err().field, "outputs[0]");
        let mut r = req("true");
        r.max_retries = 1000;
        assert_eq!(check(&r).unwrap_err().field, "max_retries");
    }

    #[test]
    fn every_problem_is_listed_once_per_field() {
        let mut r = req("");
        r.timeout_s = MAX_TIMEOUT_S + 1;
        r.runtime_env.env_vars.insert("A=B".into(), "x".into());
        let fields: Vec<String> = problems(&r).into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["entrypoint", "runtime_env.env_vars.A=B", "timeout_s"]);
        assert!(check(&req("true")).is_ok());
    }
}
