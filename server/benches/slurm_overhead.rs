//! Slurm: `n` trivial jobs (`true`, 1 CPU) straight through `sbatch` vs through Berth, with
//! the same number in flight, on the test cluster `.ci/slurm.sh` starts (`BERTH_BENCH_SLURM`,
//! its `GPU_CONF:CPU_CONF`; the first, 16 CPUs, is used).
//!
//! * **sbatch**: what a user's script does: keep `cap` jobs submitted, poll them with one
//!   `squeue -j` every 100 ms, submit the next as one leaves the queue;
//! * **berth jobs**: every job POSTed at once to a server whose queue has `cap` CPUs on that
//!   cluster (`--slurm-max-in-flight cap`, its status poll at the same 100 ms);
//! * **berth array**: the same jobs as one Berth array (a stage of tasks with their index,
//!   as `berth jobs submit --array` makes it) on a second server with `--slurm-arrays`: the
//!   tasks that start in one cycle go to Slurm as one job array;
//! * **array, no Slurm arrays**: that array on the first server (each task alone).
//!
//! They take turns in two rounds of `n/2` (the second in reverse order), each from an empty
//! Slurm queue; times are sums over the rounds, from the first submission to the last job's
//! end as each side sees it. Berth's own time per job is from its admission to `sbatch`
//! returning (`admitted_at` → `started_at`); Slurm's times are whole seconds, so the time
//! from Slurm's end of a job to Berth's is not measured per job: the time ratio covers it.

use std::collections::BTreeSet;

use super::*;

const CAP: usize = 16;

pub async fn run(conf: &str) {
    let n = if quick() { 40 } else { 200 };
    let common = ["--no-local", "--slurm", &format!("bench={conf}"), "--slurm-max-in-flight", &CAP.to_string(), "--slurm-poll-ms", "100"];
    let server = Server::start("slurm", &common).await;
    let arrays = Server::start("slurm-arrays", &[&common[..], &["--slurm-arrays"]].concat()).await;
    for s in [&server, &arrays] {
        s.apply(&one_slurm_queue()).await;
    }
    let runners = ["sbatch", "berth jobs", "berth array", "array, no Slurm arrays"];
    let mut time = [0.0f64; 4];
    let mut dispatch_ms: [Vec<f64>; 4] = Default::default();
    for round in 0..2 {
        let k = n / 2 + if round == 0 { n % 2 } else { 0 };
        let order: Vec<usize> = if round == 0 { vec![0, 1, 2, 3] } else { vec![3, 2, 1, 0] };
        for r in order {
            empty_queue(conf).await;
            // Each server's next node read no longer counts the last runner's jobs.
            tokio::time::sleep(Duration::from_millis(2100)).await;
            let (wall, ms) = match r {
                0 => (through_sbatch(conf, k).await, Vec::new()),
                1 => through_berth(&server, k, false).await,
                2 => through_berth(&arrays, k, true).await,
                _ => through_berth(&server, k, true).await,
            };
            time[r] += wall;
            dispatch_ms[r].extend(ms);
        }
    }
    let made = slurm_arrays(&arrays);
    println!("\n## Slurm: {n} `true` jobs, {CAP} in flight: sbatch loop vs through Berth as separate jobs vs as one Berth array (2 rounds taking turns)");
    println!("{:<24} | {:>9} | {:>8} | {:>24}", "runner", "time", "vs sbatch", "admission -> start p50/p99");
    println!("{}", "-".repeat(74));
    for (r, name) in runners.iter().enumerate() {
        dispatch_ms[r].sort_by(f64::total_cmp);
        let per_job = if r == 0 { "-".to_string() } else { format!("{:.0} / {:.0} ms", percentile(&dispatch_ms[r], 0.5), percentile(&dispatch_ms[r], 0.99)) };
        println!("{name:<24} | {:>7.2} s | {:>7.2}x | {per_job:>24}", time[r], time[r] / time[0]);
    }
    let ratio = time[1] / time[0];
    println!("time ratio berth jobs / sbatch: {ratio:.2}x (target <= 1.1x: {})", if ratio <= 1.1 { "met" } else { "NOT met" });
    println!("berth array with Slurm arrays / without: {:.2}x", time[2] / time[3]);
    println!("Slurm job arrays made for the berth array rows: {} holding {} tasks ({:.1} per array); the rest went alone", made.0, made.1, made.1 as f64 / made.0.max(1) as f64);
}

/// The Slurm job arrays `server` submitted and how many tasks they held (from the run
/// directories: one `array-*` directory per array, one `slurm_array` mark per task).
fn slurm_arrays(server: &Server) -> (usize, usize) {
    let root = server.dir.join("data/slurm/bench");
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(&root).map(|d| d.flatten().collect()).unwrap_or_default();
    let arrays = entries.iter().filter(|e| e.file_name().to_string_lossy().starts_with("array-")).count();
    let tasks = entries.iter().filter(|e| e.path().join("slurm_array").exists()).count();
    (arrays, tasks)
}

fn one_slurm_queue() -> String {
    format!(
        "resource_flavors:\n  - name: slurm\n    selector:\n      - {{key: slurm.cluster, operator: in, values: [bench]}}\n\
         resource_queues:\n  - name: q\n    resource_groups:\n      - covered_resources: [cpu]\n        \
         flavors: [{{name: slurm, resources: [{{name: cpu, nominal_quota: {CAP}}}]}}]\n\
         scheduling_rules:\n  - resource_queue: q\n"
    )
}

/// A Slurm command on the cluster of `conf`; its stdout.
async fn slurm(conf: &str, cmd: &str, args: &[&str]) -> String {
    let out = tokio::process::Command::new(cmd).args(args).env("SLURM_CONF", conf).env_remove("SLURM_JWT").output().await;
    out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
}

/// Cancels whatever is queued and waits until Slurm's queue is empty.
async fn empty_queue(conf: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = slurm(conf, "squeue", &["-h", "-t", "PD,R,CG,CF,S", "-o", "%i"]).await;
        let ids: Vec<&str> = left.split_whitespace().collect();
        if ids.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "Slurm's queue did not empty: {left}");
        slurm(conf, "scancel", &ids).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The sbatch loop; seconds until the last job left the queue.
async fn through_sbatch(conf: &str, n: usize) -> f64 {
    let t0 = Instant::now();
    let (mut submitted, mut live) = (0, BTreeSet::<String>::new());
    while submitted < n || !live.is_empty() {
        if !live.is_empty() {
            let ids = live.iter().map(String::as_str).collect::<Vec<_>>().join(",");
            let queued = slurm(conf, "squeue", &["-h", "-t", "PD,R,CG,CF", "-j", &ids, "-o", "%i"]).await;
            let queued: BTreeSet<&str> = queued.split_whitespace().collect();
            live.retain(|id| queued.contains(id.as_str()));
        }
        while submitted < n && live.len() < CAP {
            let out = slurm(conf, "sbatch", &["--parsable", "-J", "bench-direct", "-o", "/dev/null", "-e", "/dev/null", "--wrap", "true"]).await;
            let id = out.trim().split(';').next().unwrap_or_default().to_string();
            assert!(!id.is_empty(), "sbatch gave no job id");
            live.insert(id);
            submitted += 1;
        }
        if !live.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    t0.elapsed().as_secs_f64()
}

/// Every job POSTed at once (as separate jobs, or as one stage of array tasks as
/// `berth jobs submit --array` makes them); seconds from the first submission to the last
/// `finished_at`, and each job's admission → start in milliseconds.
async fn through_berth(server: &Server, n: usize, array: bool) -> (f64, Vec<f64>) {
    let t0 = Utc::now();
    let ids = if array { submit_array(server, n).await } else { submit_each(server, n).await };
    let never = server.drain(Duration::from_secs(300)).await;
    assert!(never.is_empty(), "{} Slurm jobs never ended through Berth", never.len());
    let (mut last, mut dispatch) = (t0, Vec::with_capacity(n));
    for id in &ids {
        let job = server.get(&format!("/api/v1/jobs/{id}")).await;
        assert_eq!(job["state"], "succeeded", "{job}");
        last = last.max(time(&job["finished_at"]).unwrap_or(t0));
        dispatch.extend(ms_between(&job["admitted_at"], &job["started_at"]));
    }
    ((last - t0).num_milliseconds() as f64 / 1000.0, dispatch)
}

async fn submit_each(server: &Server, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(server.submit(&json!({"entrypoint": "true", "resources": {"cpu": 1}})).await);
    }
    ids
}

/// One stage of `n` tasks, each with its index in the environment as Berth's arrays set it.
async fn submit_array(server: &Server, n: usize) -> Vec<String> {
    let jobs: Vec<Value> = (0..n)
        .map(|i| {
            let env = json!({"BERTH_ARRAY_INDEX": i.to_string(), "SLURM_ARRAY_TASK_ID": i.to_string(), "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": (n - 1).to_string(), "SLURM_ARRAY_TASK_COUNT": n.to_string()});
            json!({"name": format!("true[{i}]"), "entrypoint": "true", "resources": {"cpu": 1}, "runtime_env": {"env_vars": env}})
        })
        .collect();
    let body = json!({"name": "true", "jobs": jobs, "parallelism": {"max_concurrent": 0}});
    let r = server.http.post(format!("{}/api/v1/stages", server.url)).json(&body).send().await.unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status.as_u16(), 201, "{v}");
    v["job_ids"].as_array().unwrap().iter().map(|id| id.as_str().unwrap().to_string()).collect()
}
