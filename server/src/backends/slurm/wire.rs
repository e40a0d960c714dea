//! Translation between Berth and Slurm's command-line tools: the batch script and `sbatch`
//! options of a run, `scontrol`/`squeue` text to job states, outcomes and nodes.
//!
//! Only text output is read (`-o`/`-O` columns and `scontrol … -o` `Key=Value` lines): it is
//! the same from 22.05 on, while `--json` follows the REST plugin's schema version, which
//! changes between releases (shared/recipes/SLURM.md §7).

use super::*;

/// `Key=Value` pairs of one `scontrol … -o` line. A word without `=` belongs to the value
/// before it (`OS=Linux 6.1 #1 SMP`, `Reason=maint [root@…]`); the first of a repeated key
/// wins.
pub(super) fn key_values(line: &str) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    let mut last: Option<String> = None;
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some((k, v)) if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || "/:_.".contains(c)) => {
                if out.contains_key(k) {
                    last = None;
                    continue;
                }
                out.insert(k.to_string(), v.to_string());
                last = Some(k.to_string());
            }
            _ => {
                if let Some(v) = last.as_ref().and_then(|k| out.get_mut(k)) {
                    v.push(' ');
                    v.push_str(word);
                }
            }
        }
    }
    out
}

/// A Slurm job state as Berth cares about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting in Slurm's queue (or requeued, held, suspended): holds nothing yet.
    Waiting,
    /// Has an allocation (running, or cleaning up after its end).
    Holding,
    /// Ended for good, with Slurm's state name.
    Ended(String),
}

/// The phase of a `JobState` name (`squeue %T`, `scontrol JobState`).
pub(super) fn phase(state: &str) -> Phase {
    match state.trim() {
        "RUNNING" | "COMPLETING" | "CONFIGURING" | "SIGNALING" | "STAGE_OUT" | "RESIZING" | "STOPPED" => Phase::Holding,
        s @ ("COMPLETED" | "FAILED" | "CANCELLED" | "TIMEOUT" | "NODE_FAIL" | "PREEMPTED" | "OUT_OF_MEMORY" | "BOOT_FAIL"
        | "DEADLINE" | "REVOKED" | "SPECIAL_EXIT") => Phase::Ended(s.to_string()),
        _ => Phase::Waiting,
    }
}

/// `ExitCode=3:0` (code, signal), or `squeue`'s `exit_code`, the wait status (`768`: code 3;
/// `9`: signal 9).
pub(super) fn exit_code(text: &str) -> (i32, i32) {
    match text.split_once(':') {
        Some((code, signal)) => (code.trim().parse().unwrap_or(0), signal.trim().parse().unwrap_or(0)),
        None => {
            let status: i32 = text.trim().parse().unwrap_or(0);
            match status & 0x7f {
                0 => ((status >> 8) & 0xff, 0),
                signal => (0, signal),
            }
        }
    }
}

/// How a run ended, from Slurm's final state, its reason and `ExitCode`.
pub(super) fn outcome(state: &str, reason: &str, exit: &str, nodes: &str) -> Outcome {
    let (code, signal) = exit_code(exit);
    let reason = match reason.trim() {
        "" | "None" | "(null)" => String::new(),
        r => format!(" ({r})"),
    };
    let on = match nodes.trim() {
        "" | "(null)" | "None assigned" => String::new(),
        n => format!(" on {n}"),
    };
    match state {
        "COMPLETED" if code == 0 && signal == 0 => Outcome::Exited(0),
        "COMPLETED" | "FAILED" if signal != 0 => Outcome::Signaled(signal),
        "COMPLETED" | "FAILED" if code != 0 => Outcome::Exited(code),
        "FAILED" => Outcome::Failed(format!("failed in Slurm{reason}")),
        "TIMEOUT" => Outcome::TimedOut(format!("Slurm's time limit passed (TIMEOUT{on})")),
        "OUT_OF_MEMORY" => Outcome::Failed(format!("out of memory: Slurm stopped it (OUT_OF_MEMORY{on})")),
        "NODE_FAIL" => Outcome::Failed(format!("its Slurm node failed (NODE_FAIL{on})")),
        "PREEMPTED" => Outcome::Failed(format!("preempted by Slurm itself, not by Berth (PREEMPTED{on})")),
        "CANCELLED" => Outcome::Failed(format!("cancelled in Slurm, not by Berth{reason}")),
        other => Outcome::Failed(format!("ended in Slurm as {other}{reason}")),
    }
}

/// One row of the status query: `JobArrayID|State|Reason|NodeList|tres-alloc|Name|exit_code|`
/// (the id of an array's task is `ARRAYID_INDEX`, of any other job its number).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    pub id: String,
    pub state: String,
    pub reason: String,
    pub nodes: String,
    pub alloc: Resources,
    pub name: String,
    /// The wait status, once the job has ended (see [`exit_code`]).
    pub exit: String,
}

/// The `squeue -r -O` columns [`parse_rows`] reads (`-r`: one row per task of an array,
/// also while it waits; `JobID` would give a task's own number, unknown before it starts).
pub(super) const ROW_FORMAT: &str = "JobArrayID:|,State:|,Reason:|,NodeList:|,tres-alloc:|,Name:|,exit_code:|";

pub(super) fn parse_rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('|').map(str::trim).collect();
            if f.len() < 6 || f[0].is_empty() {
                return None;
            }
            Some(Row {
                id: f[0].to_string(),
                state: f[1].to_string(),
                reason: f[2].to_string(),
                nodes: f[3].to_string(),
                alloc: tres(f[4]),
                name: f[5].to_string(),
                exit: f.get(6).map_or("", |e| *e).to_string(),
            })
        })
        .collect()
}

/// Megabytes in text like `200M`, `62.50G`, `1T`, `512` (MB).
pub(super) fn megabytes(text: &str) -> Option<f64> {
    let t = text.trim();
    let (num, factor) = match t.chars().last()? {
        'K' => (&t[..t.len() - 1], 1.0 / 1024.0),
        'M' => (&t[..t.len() - 1], 1.0),
        'G' => (&t[..t.len() - 1], 1024.0),
        'T' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    num.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).map(|x| x * factor)
}

/// Berth's resources of a TRES string (`cpu=2,mem=200M,node=1,billing=2,gres/gpu=1`).
pub(super) fn tres(text: &str) -> Resources {
    let mut out: Vec<(Name, Milli)> = Vec::new();
    for part in text.split(',') {
        let Some((k, v)) = part.split_once('=') else { continue };
        let amount = match k {
            "cpu" => v.parse::<f64>().ok(),
            "mem" => megabytes(v).map(|mb| mb / 1024.0),
            _ => None,
        };
        let name = if k == "cpu" { "cpu" } else { "memory_gb" };
        if let Some(m) = amount.and_then(Milli::from_f64) {
            out.push((name.into(), m));
        }
    }
    Resources::new(out)
}

/// Counts per resource of a GRES list (`gpu:a100:4,gpu:v100:2(S:0-1)`, `gpu:2(IDX:0-1)`,
/// `(null)`): Berth's name of each (`gpu`, else the GRES name) and the types seen.
pub(super) fn gres(text: &str) -> (BTreeMap<String, f64>, Vec<String>) {
    let mut counts: BTreeMap<String, f64> = BTreeMap::new();
    let mut types = Vec::new();
    // Commas also appear inside `(IDX:0,2)`: split at top level only.
    let mut depth = 0;
    let mut items = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        if depth == 0 && c != ')' {
            cur.push(c);
        }
    }
    items.push(cur);
    for item in items {
        let parts: Vec<&str> = item.trim().split(':').collect();
        if parts.len() < 2 || parts[0].is_empty() || parts[0] == "(null)" {
            continue;
        }
        let Ok(n) = parts[parts.len() - 1].parse::<f64>() else { continue };
        *counts.entry(parts[0].to_string()).or_default() += n;
        if parts.len() >= 3 && parts[0] == "gpu" && !types.contains(&parts[1].to_string()) {
            types.push(parts[1].to_string());
        }
    }
    (counts, types)
}

/// Whether a node `State=` (`IDLE`, `MIXED+DRAIN`, `IDLE*`, `DOWN+NOT_RESPONDING`) can take
/// work: down, drained, failing, powered off or silent nodes count as absent.
pub(super) fn usable(state: &str) -> bool {
    if state.contains('*') {
        return false;
    }
    let mut words = state.split('+');
    let base = words.next().unwrap_or_default();
    let bad_flag = words.any(|f| {
        matches!(f, "DRAIN" | "DRAINING" | "DRAINED" | "FAIL" | "FAILING" | "NOT_RESPONDING" | "POWERED_DOWN" | "POWERING_DOWN" | "POWER_DOWN" | "MAINT" | "REBOOT_ISSUED" | "REBOOT_REQUESTED" | "INVALID_REG")
    });
    matches!(base, "IDLE" | "MIXED" | "ALLOCATED" | "COMPLETING") && !bad_flag
}

/// Berth's id of a Slurm node: `CLUSTER:NODENAME`.
pub(super) fn node_id(backend: &str, slurm_node: &str) -> String {
    format!("{backend}:{slurm_node}")
}

/// The nodes of `scontrol -d show node -o`, sorted by id, each saying whether it can take
/// work now ([`usable`]).
pub(super) fn parse_nodes(backend: &str, text: &str) -> Vec<Listed> {
    let mut out: Vec<Listed> = text
        .lines()
        .filter_map(|line| {
            let kv = key_values(line);
            let name = kv.get("NodeName")?.clone();
            let usable = usable(kv.get("State").map(String::as_str).unwrap_or(""));
            let num = |k: &str| kv.get(k).and_then(|v| v.parse::<f64>().ok()).filter(|x| x.is_finite() && *x >= 0.0);
            let list = |k: &str| -> Vec<String> {
                kv.get(k).map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty() && *s != "(null)").map(String::from).collect()).unwrap_or_default()
            };
            let mut capacity: Vec<(Name, Milli)> = Vec::new();
            let mut used: Vec<(Name, Milli)> = Vec::new();
            let push = |to: &mut Vec<(Name, Milli)>, name: &str, x: f64| {
                if let Some(m) = Milli::from_f64((x * 1000.0).floor() / 1000.0) {
                    to.push((name.into(), m));
                }
            };
            push(&mut capacity, "cpu", num("CPUTot").or_else(|| num("CPUEfctv")).unwrap_or(0.0));
            push(&mut capacity, "memory_gb", num("RealMemory").unwrap_or(0.0) / 1024.0);
            push(&mut used, "cpu", num("CPUAlloc").unwrap_or(0.0));
            push(&mut used, "memory_gb", num("AllocMem").unwrap_or(0.0) / 1024.0);
            let (total, types) = gres(kv.get("Gres").map(String::as_str).unwrap_or(""));
            let (in_use, _) = gres(kv.get("GresUsed").map(String::as_str).unwrap_or(""));
            for (g, n) in &total {
                push(&mut capacity, g, *n);
                push(&mut used, g, in_use.get(g).copied().unwrap_or(0.0));
            }
            let mut labels: Labels = BTreeMap::new();
            labels.insert("backend".into(), "slurm".into());
            labels.insert("slurm.cluster".into(), backend.to_string());
            labels.insert("slurm.node".into(), name.clone());
            let partitions = list("Partitions");
            for p in &partitions {
                labels.insert(format!("partition.{p}"), "true".into());
            }
            // One value per key: a node in one partition also gets `partition=<it>`.
            if let [only] = partitions.as_slice() {
                labels.insert("partition".into(), only.clone());
            }
            let features = if kv.contains_key("ActiveFeatures") { list("ActiveFeatures") } else { list("AvailableFeatures") };
            for f in &features {
                labels.insert(format!("feature.{f}"), "true".into());
            }
            if !types.is_empty() {
                labels.insert("gpu.type".into(), types.join(","));
            }
            let node = Node {
                id: node_id(backend, &name).into(),
                backend: backend.into(),
                labels,
                capacity: Resources::new(capacity),
                used_outside: Resources::default(),
            };
            Some(Listed { node, slurm_name: name, partitions, allocated: Resources::new(used), usable })
        })
        .collect();
    out.sort_by(|a, b| a.node.id.cmp(&b.node.id));
    out
}

/// A shell word: `'…'` with each `'` as `'\''`.
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Whether `k` can be a shell variable name.
fn env_name(k: &str) -> bool {
    let mut c = k.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_') && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// The batch script of a run: its environment, then the entrypoint under `/bin/sh -c`.
pub(super) fn script(spec: &StartSpec) -> Result<String, String> {
    let mut s = String::from("#!/bin/sh\n");
    s.push_str(&format!("# Berth run {} of job {}\n", spec.run.key(), spec.run.job));
    let mut env: Vec<(String, String)> = spec.env_vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    env.push(("BERTH_JOB_ID".into(), spec.run.job.to_string()));
    env.push(("BERTH_RUN".into(), spec.run.run.to_string()));
    for (k, v) in env {
        if !env_name(&k) {
            return Err(format!("runtime_env.env_vars: `{k}` is not a variable name a shell can set"));
        }
        s.push_str(&format!("export {k}={}\n", quote(&v)));
    }
    s.push_str(&format!("exec /bin/sh -c {}\n", quote(&spec.entrypoint)));
    Ok(s)
}

/// The partitions and features a run's flavor selectors name, from the loop's
/// `selector_labels`: `partition: P` or `partition in [P, Q]`, `partition.P: "true"`,
/// `feature.F: "true"`. (`exists` terms have no value there; the run is pinned to the node
/// the engine chose anyway, so they still hold.)
pub(super) fn selection(selector: &BTreeMap<String, String>) -> (Vec<String>, Vec<String>) {
    let (mut partitions, mut features) = (Vec::new(), Vec::new());
    for (k, v) in selector {
        if k == "partition" {
            let inner = v.strip_prefix("in(").and_then(|x| x.strip_suffix(')')).unwrap_or(v);
            if !inner.starts_with('!') {
                partitions.extend(inner.split(',').map(str::trim).filter(|p| !p.is_empty()).map(String::from));
            }
        } else if let (Some(p), "true") = (k.strip_prefix("partition."), v.as_str()) {
            partitions.push(p.to_string());
        } else if let (Some(f), "true") = (k.strip_prefix("feature."), v.as_str()) {
            features.push(f.to_string());
        }
    }
    partitions.sort();
    partitions.dedup();
    features.sort();
    features.dedup();
    (partitions, features)
}

/// `sbatch` arguments of a run (everything but the script path).
pub(super) fn sbatch_args(spec: &StartSpec, node: &str, partitions: &[String], features: &[String], dir: &Path, workdir: &Path) -> Vec<String> {
    let mut a = request_args(spec, node, partitions, features);
    a.push(format!("--job-name={}", spec.run.key()));
    a.push(format!("--comment=berth-job:{}", spec.run.job));
    a.push(format!("--chdir={}", workdir.display()));
    a.push(format!("--output={}", dir.join("stdout").display()));
    a.push(format!("--error={}", dir.join("stderr").display()));
    a
}

/// The `sbatch` options of a run's request and placement, shared by a lone run and a job
/// array: node, partitions, features, CPUs, memory, GRES, time limit, no requeue.
pub(super) fn request_args(spec: &StartSpec, node: &str, partitions: &[String], features: &[String]) -> Vec<String> {
    let mut a: Vec<String> = vec!["--parsable".into(), "--no-requeue".into()];
    a.push(format!("--nodelist={node}"));
    if !partitions.is_empty() {
        a.push(format!("--partition={}", partitions.join(",")));
    }
    if !features.is_empty() {
        a.push(format!("--constraint={}", features.join("&")));
    }
    let amount = |n: &str| spec.resources.iter().find(|(k, _)| &***k == n).map(|(_, v)| v.as_f64()).unwrap_or(0.0);
    a.push(format!("--cpus-per-task={}", (amount("cpu").ceil() as u64).max(1)));
    let mem = amount("memory_gb");
    if mem > 0.0 {
        a.push(format!("--mem={}M", (mem * 1024.0).ceil() as u64));
    }
    let mut gres: Vec<String> = Vec::new();
    for (name, m) in spec.resources.iter() {
        let n = m.as_f64().ceil() as u64;
        if n > 0 && !matches!(&**name, "cpu" | "memory_gb") {
            gres.push(format!("{name}:{n}"));
        }
    }
    if !gres.is_empty() {
        a.push(format!("--gres={}", gres.join(",")));
    }
    if spec.timeout_s > 0 {
        // Whole minutes: the cluster's stop comes at or after Berth's own.
        a.push(format!("--time={}", spec.timeout_s.div_ceil(60)));
    }
    a
}

/// The job id `sbatch --parsable` printed (`42` or `42;cluster`).
pub(super) fn parsable_id(out: &str) -> Option<String> {
    let id = out.trim().split(';').next()?.trim();
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_digit())).then(|| id.to_string())
}

/// A job Berth watches, as written down or stored as a run's handle: a job id (`42`) or
/// an array's task (`42_3`).
pub(super) fn job_ref(text: &str) -> Option<String> {
    let t = text.trim();
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let ok = match t.split_once('_') {
        Some((job, task)) => digits(job) && digits(task),
        None => digits(t),
    };
    ok.then(|| t.to_string())
}

/// The last non-empty line of a command's error output, bounded.
pub(super) fn last_line(text: &str) -> String {
    let line = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("(no output)");
    line.chars().take(300).collect()
}
