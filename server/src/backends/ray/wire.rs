//! Translation between Berth and Ray's Jobs REST API: submission bodies, job states to
//! outcomes, node lists to Berth's nodes, label selectors, error text.

use super::*;

/// The body of `POST /api/jobs/` for a run: only fields Ray knows.
pub(super) fn submission(spec: &StartSpec, real_label_keys: &[String]) -> Value {
    let mut runtime_env: Map<String, Value> = spec.runtime_env.clone();
    let mut env_vars: Map<String, Value> = spec.env_vars.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    env_vars.insert("BERTH_JOB_ID".into(), Value::String(spec.run.job.to_string()));
    env_vars.insert("BERTH_RUN".into(), Value::String(spec.run.run.to_string()));
    runtime_env.insert("env_vars".into(), Value::Object(env_vars));
    if let Some(dir) = &spec.working_dir {
        runtime_env.insert("working_dir".into(), Value::String(dir.clone()));
    }
    let mut body = json!({
        "entrypoint": spec.entrypoint,
        "submission_id": spec.run.key(),
        "runtime_env": runtime_env,
        "metadata": spec.metadata,
    });
    let mut custom = Map::new();
    for (name, amount) in spec.resources.iter() {
        let x = amount.as_f64();
        if x <= 0.0 {
            continue;
        }
        match &**name {
            "cpu" => body["entrypoint_num_cpus"] = json!(x),
            "gpu" => body["entrypoint_num_gpus"] = json!(x),
            "memory_gb" => body["entrypoint_memory"] = json!((x * GIB).ceil() as u64),
            other => {
                custom.insert(other.to_string(), json!(x));
            }
        }
    }
    if !custom.is_empty() {
        body["entrypoint_resources"] = Value::Object(custom);
    }
    let selector: Map<String, Value> = spec
        .selector_labels
        .iter()
        .filter(|(k, _)| real_label_keys.iter().any(|r| r == *k))
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if !selector.is_empty() {
        body["entrypoint_label_selector"] = Value::Object(selector);
    }
    body
}

/// How a job ended, from its status record; `None` while it is pending or running.
pub(super) fn outcome_of(job: &Value) -> Option<Outcome> {
    let text = |k: &str| job.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    match job.get("status").and_then(Value::as_str).unwrap_or_default() {
        "SUCCEEDED" => Some(Outcome::Exited(0)),
        "FAILED" => {
            let (kind, message) = (text("error_type"), text("message"));
            Some(Outcome::Failed(match (kind.is_empty(), message.is_empty()) {
                (false, false) => format!("{kind}: {message}"),
                (false, true) => kind,
                (true, false) => message,
                (true, true) => "failed in Ray".into(),
            }))
        }
        "STOPPED" => Some(Outcome::Failed("stopped in Ray (not by Berth)".into())),
        _ => None,
    }
}

/// Berth's id of a Ray node: `NAME:<first 12 of Ray's id>`.
pub(super) fn node_id(backend: &str, ray_id: &str) -> String {
    let short: String = ray_id.chars().take(12).collect();
    format!("{backend}:{short}")
}

/// Berth's name of a Ray resource and the factor to Berth's unit; `None` for the ones Berth
/// leaves out. `all` is every resource of the node.
pub(super) fn berth_resource(key: &str, all: &Map<String, Value>) -> Option<(&'static str, f64)> {
    match key {
        "CPU" => Some(("cpu", 1.0)),
        "GPU" => Some(("gpu", 1.0)),
        "memory" => Some(("memory_gb", 1.0 / GIB)),
        "object_store_memory" => None,
        k if k.starts_with("node:") => None,
        // Ray's own `GPU` wins over a custom lower-case `gpu`.
        "gpu" if all.contains_key("GPU") => None,
        _ => Some(("", 1.0)),
    }
}

/// Ray's node list as engine nodes (alive ones, sorted by id so a refresh compares equal).
pub(super) fn parse_nodes(backend: &str, body: &Value) -> Vec<Listed> {
    let list = body.pointer("/data/result/result").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut nodes: Vec<Listed> = list
        .iter()
        .filter(|n| n.get("state").and_then(Value::as_str) == Some("ALIVE"))
        .filter_map(|n| {
            let ray_id = n.get("node_id")?.as_str()?;
            let mut labels: Labels = BTreeMap::new();
            if let Some(l) = n.get("labels").and_then(Value::as_object) {
                for (k, v) in l {
                    if let Some(v) = v.as_str() {
                        labels.insert(k.clone(), v.to_string());
                    }
                }
            }
            labels.entry("backend".into()).or_insert_with(|| "ray".into());
            let mut capacity: Vec<(Name, Milli)> = Vec::new();
            let mut keys = Vec::new();
            if let Some(r) = n.get("resources_total").and_then(Value::as_object) {
                for (k, v) in r {
                    let (Some(x), Some((name, factor))) = (v.as_f64(), berth_resource(k, r)) else { continue };
                    let name: Name = if name.is_empty() { k.as_str().into() } else { name.into() };
                    // Memory is rounded down: a request of the whole node must still fit in Ray.
                    let x = if factor == 1.0 { x } else { (x * factor * 1000.0).floor() / 1000.0 };
                    if let Some(m) = Milli::from_f64(x) {
                        capacity.push((name.clone(), m));
                    }
                    keys.push((usage::camel_case(k), name, factor));
                }
            }
            let node = Node {
                id: node_id(backend, ray_id).into(),
                backend: backend.into(),
                labels,
                capacity: Resources::new(capacity),
                used_outside: Resources::default(),
            };
            Some(Listed { node, ray_id: ray_id.to_string(), keys })
        })
        .collect();
    nodes.sort_by(|a, b| a.node.id.cmp(&b.node.id));
    nodes
}

/// The last non-empty line of a body (Ray's errors are Python tracebacks), bounded.
pub(super) fn last_line(body: &str) -> String {
    let line = body.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("(empty body)");
    line.chars().take(300).collect()
}

/// An error with its causes (`error sending request: … : Connection refused`).
pub(super) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// A flavor selector term as Ray's label selector writes it, when it has one
/// (`Exists`/`DoesNotExist` have no form there).
pub fn selector_value(m: &MatchExpression) -> Option<String> {
    let values = m.values.as_deref().unwrap_or_default();
    match m.operator {
        Operator::In if values.len() == 1 => Some(values[0].clone()),
        Operator::In => Some(format!("in({})", values.join(","))),
        Operator::NotIn if values.len() == 1 => Some(format!("!{}", values[0])),
        Operator::NotIn => Some(format!("!in({})", values.join(","))),
        Operator::Exists | Operator::DoesNotExist => None,
    }
}
