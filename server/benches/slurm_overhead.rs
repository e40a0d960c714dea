//! Slurm: `n` trivial jobs (`true`, 1 CPU) straight through `sbatch` vs through Berth, with
//! the same number in flight, on the test cluster `.ci/slurm.sh` starts (`BERTH_BENCH_SLURM`,
//! its `GPU_CONF:CPU_CONF`; the first, 16 CPUs, is used).
//!
//! * **sbatch**: what a user's script does: keep `cap` jobs submitted, poll them with one
//!   `squeue -j` every 100 ms, submit the next as one leaves the queue;
//! * **berth**: every job POSTed at once to a server whose queue has `cap` CPUs on that
//!   cluster (`--slurm-max-in-flight cap`, its status poll at the same 100 ms).
//!
//! The two take turns in two rounds of `n/2` (who goes first alternates), each from an empty
//! Slurm queue; times are sums over the rounds, from the first submission to the last job's
//! end as each side sees it. Berth's own time per job is from its admission to `sbatch`
//! returning (`admitted_at` → `started_at`); Slurm's times are whole seconds, so the time
//! from Slurm's end of a job to Berth's is not measured per job: the time ratio covers it.

use std::collections::BTreeSet;

use super::*;

const CAP: usize = 16;

pub async fn run(conf: &str) {
    let n = if quick() { 40 } else { 200 };
    let server = Server::start(
        "slurm",
        &["--no-local", "--slurm", &format!("bench={conf}"), "--slurm-max-in-flight", &CAP.to_string(), "--slurm-poll-ms", "100"],
    )
    .await;
    server.apply(&one_slurm_queue()).await;
    let (mut direct, mut berth) = (0.0, 0.0);
    let mut dispatch_ms = Vec::new();
    for round in 0..2 {
        let k = n / 2 + if round == 0 { n % 2 } else { 0 };
        for who in if round == 0 { ["sbatch", "berth"] } else { ["berth", "sbatch"] } {
            empty_queue(conf).await;
            match who {
                "sbatch" => direct += through_sbatch(conf, k).await,
                _ => {
                    let (wall, ms) = through_berth(&server, k).await;
                    berth += wall;
                    dispatch_ms.extend(ms);
                }
            }
        }
    }
    dispatch_ms.sort_by(f64::total_cmp);
    println!("\n## Slurm: {n} `true` jobs, {CAP} in flight, straight through sbatch vs through Berth (2 rounds taking turns)");
    println!("{:<8} | {:>9}", "runner", "time");
    println!("{}", "-".repeat(21));
    println!("{:<8} | {direct:>7.2} s", "sbatch");
    println!("{:<8} | {berth:>7.2} s", "berth");
    let ratio = berth / direct;
    println!("time ratio berth / sbatch: {ratio:.2}x (target <= 1.1x: {})", if ratio <= 1.1 { "met" } else { "NOT met" });
    println!(
        "Berth's admission to sbatch returning, per job: p50 {:.0} ms, p99 {:.0} ms",
        percentile(&dispatch_ms, 0.5),
        percentile(&dispatch_ms, 0.99)
    );
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

/// Every job POSTed at once; seconds from the first submission to the last `finished_at`,
/// and each job's admission → start in milliseconds.
async fn through_berth(server: &Server, n: usize) -> (f64, Vec<f64>) {
    let t0 = Utc::now();
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(server.submit(&json!({"entrypoint": "true", "resources": {"cpu": 1}})).await);
    }
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
