//! `berth jobs …`, `berth events`, `berth stages …`: the runtime's commands, over HTTP like
//! the config ones (`berth queues` and `berth nodes` are in `queues.rs`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use app::jobs::{EventPage, Job, JobPage, JobRequest, ResourceRequest, StageCreated, StageRequest, StageResults, StageStatus};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::cli::{print_json, read_file, report_error, Cli, Output};
use crate::cli::client::{encode, ClientError};
use crate::cli::array::array_stage;
use crate::cli::wait;

/// `berth jobs …`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Submit a job: `berth jobs submit --cpu 2 -- python train.py --lr 0.1`. Prints its id.
    Submit(SubmitArgs),
    /// List jobs, newest first.
    List {
        #[arg(long)]
        queue: Option<String>,
        /// One or more states, comma-separated (pending,running,…).
        #[arg(long)]
        state: Option<String>,
        /// `KEY=VALUE`.
        #[arg(long)]
        label: Option<String>,
        #[arg(long)]
        submitter: Option<String>,
        #[arg(long)]
        stage: Option<String>,
        /// Substring of the id or name.
        #[arg(long)]
        search: Option<String>,
        #[arg(long, default_value_t = 50)]
        max_items: i64,
        #[arg(long)]
        cursor: Option<String>,
        /// Why pending jobs wait in full (every flavor tried, with the numbers), instead of
        /// the one-line headline.
        #[arg(long)]
        full_reason: bool,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Show one job: state, placement, why it waits (headline and full explanation), history.
    Get {
        id: String,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Print a job's log: stdout and stderr (stderr lines marked `[stderr] `), or one of
    /// them. Exits with the job's code once it has ended (see `--wait`).
    Logs {
        id: String,
        /// Only stdout.
        #[arg(long, conflicts_with = "stderr")]
        stdout: bool,
        /// Only stderr.
        #[arg(long)]
        stderr: bool,
        /// Only the last N lines.
        #[arg(long)]
        tail: Option<u64>,
        /// Keep printing as the log grows, until the job ends.
        #[arg(short, long)]
        follow: bool,
    },
    /// Cancel a pending or running job.
    Cancel { id: String },
    /// Hold a pending job: it stays pending and is not admitted until released.
    Hold { id: String },
    /// Release a held job.
    Release { id: String },
    /// Change a job's priority (within its rule's bounds; it may be negative).
    Priority {
        id: String,
        #[arg(allow_negative_numbers = true)]
        priority: i64,
    },
}

/// Options of `berth jobs submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[arg(long)]
    name: Option<String>,
    /// Your own id for the job, unique (Ray's `submission_id`): it can be read and stopped
    /// by it, here and through Ray's job API.
    #[arg(long)]
    submission_id: Option<String>,
    #[arg(long)]
    cpu: Option<f64>,
    #[arg(long)]
    gpu: Option<f64>,
    #[arg(long)]
    memory_gb: Option<f64>,
    /// Another resource, `NAME=AMOUNT` (repeatable).
    #[arg(long = "resource", value_name = "NAME=AMOUNT")]
    resources: Vec<String>,
    /// `KEY=VALUE` (repeatable); rules route by labels.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    /// Priority (may be negative: `--priority -5`); default: the rule's.
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i64>,
    /// Seconds of running before the job is stopped (0: no limit).
    #[arg(long, default_value_t = 0)]
    timeout: u64,
    /// Retries of a failed run.
    #[arg(long, default_value_t = 0)]
    retries: u32,
    /// Working directory on the server's host. Default: the current directory when the
    /// server runs on this host, else a fresh directory per run.
    #[arg(long, conflicts_with = "fresh_workdir")]
    workdir: Option<PathBuf>,
    /// Run in a fresh directory per run (under the server's data dir), not the current one.
    #[arg(long)]
    fresh_workdir: bool,
    /// Follow the job's stdout and stderr until it ends, then exit with its code: 0
    /// succeeded, its own code when it failed, 124 timed out, 130 cancelled, 65 rejected.
    #[arg(long)]
    wait: bool,
    /// Run only after each of these jobs (ids, submission ids or stage ids) succeeded
    /// (sbatch `--dependency=afterok`); one that fails or is cancelled fails this job.
    #[arg(long = "after-ok", value_name = "ID", num_args = 1.., value_delimiter = ',')]
    after_ok: Vec<String>,
    /// Run only after each of these jobs ended, however (`afterany`).
    #[arg(long = "after-any", value_name = "ID", num_args = 1.., value_delimiter = ',')]
    after_any: Vec<String>,
    /// Run only after each of these jobs failed, timed out or was cancelled (`afternotok`).
    #[arg(long = "after-not-ok", value_name = "ID", num_args = 1.., value_delimiter = ',')]
    after_not_ok: Vec<String>,
    /// Submit it held: it waits until `berth jobs release ID`.
    #[arg(long)]
    hold: bool,
    /// Submit an array of tasks, `0-99`, `1,3,5-9` or `0-99%8` (at most 8 running at once),
    /// as one stage; each task gets BERTH_ARRAY_INDEX and SLURM_ARRAY_TASK_ID. Prints the
    /// stage's id.
    #[arg(long, value_name = "RANGE[%N]")]
    array: Option<String>,
    /// Environment variable `KEY=VALUE` (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Files to collect from the working directory when the job ends (repeatable).
    #[arg(long = "output-file", value_name = "PATH")]
    outputs: Vec<String>,
    #[arg(short, long, value_enum, default_value = "text")]
    output: Output,
    /// The command and its arguments (one argument is taken as a shell command line).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// `berth stages …`.
#[derive(Debug, Subcommand)]
pub enum StagesCommand {
    /// Submit a stage from a file (YAML or JSON: name, jobs, parallelism).
    Submit {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// A stage's progress: counts by state and each job's state.
    Get {
        id: String,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Cancel every unfinished job of a stage (an array).
    Cancel {
        id: String,
    },
    /// A stage's results: each job's status, exit code, log tails and outputs.
    Results {
        id: String,
        #[arg(short, long, value_enum, default_value = "json")]
        output: Output,
    },
}

/// Options of `berth events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Kinds, comma-separated (admitted,preempted,rejected,…).
    #[arg(long)]
    kind: Option<String>,
    #[arg(long)]
    queue: Option<String>,
    #[arg(long)]
    job: Option<String>,
    /// RFC 3339 time or a duration ago (15m, 2h, 7d).
    #[arg(long)]
    since: Option<String>,
    #[arg(long, default_value_t = 100)]
    max_items: i64,
    #[arg(long)]
    cursor: Option<String>,
    #[arg(short, long, value_enum, default_value = "text")]
    output: Output,
}

/// Runs a `jobs` command.
pub async fn run_jobs(cli: &Cli, command: &JobsCommand) -> Result<i32> {
    let client = cli.client();
    let outcome = match command {
        JobsCommand::Submit(args) => return submit(cli, args).await,
        JobsCommand::List { queue, state, label, submitter, stage, search, max_items, cursor, full_reason, output } => {
            let mut q: Vec<(&str, String)> = vec![("max_items", max_items.to_string())];
            for (k, v) in [("queue", queue), ("state", state), ("label", label), ("submitter", submitter), ("stage", stage), ("q", search), ("cursor", cursor)] {
                if let Some(v) = v {
                    q.push((k, v.clone()));
                }
            }
            client.get_json::<JobPage>("/api/v1/jobs", &q).await.map(|page| show(*output, &page, |p| print_jobs(p, *full_reason)))
        }
        JobsCommand::Get { id, output } => client.get_json::<Job>(&format!("/api/v1/jobs/{}", encode(id)), &[]).await.map(|job| show(*output, &job, print_job)),
        JobsCommand::Logs { id, stdout, stderr, tail, follow } => {
            let stream = if *stdout { "stdout" } else if *stderr { "stderr" } else { "both" };
            let mut q: Vec<(&str, String)> = vec![("stream", stream.into())];
            if let Some(t) = tail {
                q.push(("tail", t.to_string()));
            }
            if *follow {
                q.push(("follow", "true".into()));
            }
            let mut out = std::io::stdout();
            let printed = client.logs(id, &q, |chunk| {
                let _ = out.write_all(chunk);
                let _ = out.flush();
            });
            let code = match printed.await {
                Ok(()) => wait::ended(&client, id).await,
                Err(e) => Err(e),
            };
            return Ok(code.unwrap_or_else(|e| finish(Err(e))));
        }
        JobsCommand::Hold { id } | JobsCommand::Release { id } => {
            let verb = if matches!(command, JobsCommand::Hold { .. }) { "hold" } else { "release" };
            client
                .post_json::<Job>(&format!("/api/v1/jobs/{}/{verb}", encode(id)), &json!({}))
                .await
                .map(|job| println!("{}: {}", job.id, job.held_by.map_or("released".to_string(), |by| format!("held by {by}"))))
        }
        JobsCommand::Cancel { id } => client
            .post_json::<Job>(&format!("/api/v1/jobs/{}/cancel", encode(id)), &json!({}))
            .await
            .map(|job| println!("{}: {}", job.id, job.state.as_str())),
        JobsCommand::Priority { id, priority } => client
            .post_json::<Job>(&format!("/api/v1/jobs/{}/priority", encode(id)), &json!({ "priority": priority }))
            .await
            .map(|job| println!("{}: priority {}", job.id, job.priority)),
    };
    Ok(finish(outcome))
}

/// `berth jobs submit`: prints the new job's id, or with `--wait` follows it to its end and
/// returns its exit code.
async fn submit(cli: &Cli, args: &SubmitArgs) -> Result<i32> {
    let client = cli.client();
    let req = submit_request(args, workdir(cli, args)?)?;
    if let Some(range) = &args.array {
        return submit_array(&client, args, array_stage(&req, range)?).await;
    }
    let job = match client.post_json::<Job>("/api/v1/jobs", &req).await {
        Ok(job) => job,
        Err(e) => {
            let rejected = matches!(&e, ClientError::Api(body, _) if body.error.code == "rejected");
            let outside = matches!(&e, ClientError::Api(body, _) if body.error.message.contains("outside the allowed roots"));
            let code = finish(Err(e));
            if outside && args.workdir.is_none() {
                eprintln!("  (the current directory is the default working directory: submit from an allowed one, or add --fresh-workdir)");
            }
            return Ok(if rejected && args.wait { wait::REJECTED } else { code });
        }
    };
    if !args.wait {
        show(args.output, &job, |job| println!("{}", job.id));
        return Ok(0);
    }
    eprintln!("berth: job {} submitted; following its output (Ctrl-C stops following, not the job)", job.id);
    Ok(wait::follow(&client, &job.id).await.unwrap_or_else(|e| finish(Err(e))))
}

/// Submits an array as a stage; prints its id, or with `--wait` waits for every task.
async fn submit_array(client: &crate::cli::client::Client, args: &SubmitArgs, stage: StageRequest) -> Result<i32> {
    let created = match client.post_json::<StageCreated>("/api/v1/stages", &stage).await {
        Ok(c) => c,
        Err(e) => return Ok(finish(Err(e))),
    };
    for r in &created.rejected {
        eprintln!("  task {} ({}) rejected: {}", r.index, r.job_id, r.reason);
    }
    if !args.wait {
        show(args.output, &created, |c| println!("{}", c.stage_id));
        return Ok(0);
    }
    eprintln!("berth: array {} of {} tasks submitted; waiting for them (Ctrl-C stops waiting, not the tasks)", created.stage_id, created.job_ids.len());
    Ok(wait::stage(client, &created.stage_id).await.unwrap_or_else(|e| finish(Err(e))))
}

/// The working directory a submit names: `--workdir`; else, when the server runs on this
/// host, the current directory (said on standard error); else none, and why.
fn workdir(cli: &Cli, args: &SubmitArgs) -> Result<Option<String>> {
    if let Some(dir) = &args.workdir {
        return Ok(Some(std::path::absolute(dir).with_context(|| format!("--workdir: {}", dir.display()))?.display().to_string()));
    }
    if args.fresh_workdir {
        return Ok(None);
    }
    if !is_local(&cli.server) {
        eprintln!(
            "berth: the server {} is not on this host, so the job runs in a fresh directory there. \
             `--workdir DIR` names a directory that must exist on the server's host; to send your \
             code along, submit it as a package through Berth's Ray API (`ray job submit --working-dir .`).",
            cli.server
        );
        return Ok(None);
    }
    let cwd = std::env::current_dir().context("the current directory cannot be read; name one with --workdir DIR or use --fresh-workdir")?;
    eprintln!("berth: the job runs in {} (the current directory; --workdir DIR or --fresh-workdir to change)", cwd.display());
    Ok(Some(cwd.display().to_string()))
}

/// Whether `server` (a URL) is on this host: a loopback name or address.
fn is_local(server: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(server) else { return false };
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `value` as JSON or YAML, or for people through `text`.
pub(crate) fn show<T: serde::Serialize>(output: Output, value: &T, text: impl FnOnce(&T)) {
    match output {
        Output::Json => print_json(value),
        Output::Yaml => print!("{}", serde_norway::to_string(value).unwrap_or_default()),
        Output::Text => text(value),
    }
}

pub(crate) fn finish(outcome: Result<(), ClientError>) -> i32 {
    match outcome {
        Ok(()) => 0,
        Err(e) => {
            report_error(&e);
            if let ClientError::Api(body, _) = &e {
                if let Some(job) = body.error.details.get("job").and_then(|j| j.get("id")) {
                    eprintln!("  recorded as job {}", job.as_str().unwrap_or(""));
                }
            }
            1
        }
    }
}

fn submit_request(args: &SubmitArgs, workdir: Option<String>) -> Result<JobRequest> {
    let entrypoint = match args.command.as_slice() {
        [one] => one.clone(),
        many => many.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" "),
    };
    let mut custom = BTreeMap::new();
    for raw in &args.resources {
        let (name, amount) = raw.split_once('=').with_context(|| format!("--resource: `{raw}` is not NAME=AMOUNT"))?;
        let amount: f64 = amount.trim().parse().with_context(|| format!("--resource: `{raw}`: `{amount}` is not a number"))?;
        custom.insert(name.trim().to_string(), amount);
    }
    Ok(JobRequest {
        name: args.name.clone(),
        submission_id: args.submission_id.clone(),
        entrypoint,
        runtime_env: app::jobs::RuntimeEnv { working_dir: workdir, env_vars: pairs("--env", &args.env)?, other: Default::default() },
        labels: pairs("--label", &args.labels)?,
        priority: args.priority,
        resources: ResourceRequest { cpu: args.cpu, gpu: args.gpu, memory_gb: args.memory_gb, custom },
        timeout_s: args.timeout,
        max_retries: args.retries,
        outputs: args.outputs.clone(),
        after_ok: args.after_ok.clone(),
        after_any: args.after_any.clone(),
        after_not_ok: args.after_not_ok.clone(),
        hold: args.hold,
        held_by: None,
    })
}

fn pairs(flag: &str, raw: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for r in raw {
        let Some((k, v)) = r.split_once('=') else { bail!("{flag}: `{r}` is not KEY=VALUE") };
        if k.is_empty() {
            bail!("{flag}: `{r}` has an empty key");
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// `arg` as one word for `/bin/sh`.
fn shell_quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

pub(crate) fn ago(t: chrono::DateTime<chrono::Utc>) -> String {
    let s = (chrono::Utc::now() - t).num_seconds().max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// Why a job waits, as a person first reads it: the engine's one-line headline when it gave
/// one, else the reason itself (a hold, a dependency, a backoff, a rejection).
pub(crate) fn short_reason<'a>(headline: Option<&'a str>, reason: Option<&'a str>) -> &'a str {
    headline.filter(|h| !h.is_empty()).or(reason).unwrap_or("")
}

/// The jobs of `page` as a table; the REASON column holds the headline unless `full_reason`.
fn print_jobs(page: &JobPage, full_reason: bool) {
    println!("{:<18}  {:<20}  {:<10}  {:<14}  {:>4}  {:>5}  {:>4}  REASON", "ID", "NAME", "STATE", "QUEUE", "PRIO", "AGE", "EXIT");
    for j in &page.jobs {
        let reason = match full_reason {
            true => j.reason.as_deref().unwrap_or(""),
            false => short_reason(j.reason_headline.as_deref(), j.reason.as_deref()),
        };
        let pos = j.position.map(|p| format!("#{p} ")).unwrap_or_default();
        println!(
            "{:<18}  {:<20}  {:<10}  {:<14}  {:>4}  {:>5}  {:>4}  {pos}{reason}",
            j.id,
            truncate(&j.name, 20),
            j.state.as_str(),
            truncate(j.queue.as_deref().unwrap_or("-"), 14),
            j.priority,
            ago(j.submitted_at),
            j.exit_code.map_or("-".into(), |c| c.to_string())
        );
    }
    if let Some(c) = &page.next_cursor {
        println!("more: --cursor {c}");
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

fn print_job(j: &Job) {
    let line = |k: &str, v: String| println!("{k:<13} {v}");
    line("id", j.id.clone());
    if let Some(s) = &j.submission_id {
        line("submission id", s.clone());
    }
    line("name", j.name.clone());
    line("state", j.state.as_str().to_string());
    if let Some(p) = j.position {
        line("position", format!("#{p} in {}", j.queue.as_deref().unwrap_or("?")));
    }
    match (j.reason_headline.as_deref().filter(|h| !h.is_empty()), &j.reason) {
        (Some(headline), Some(full)) => {
            line("why it waits", headline.to_string());
            line("in full", full.clone());
        }
        (_, Some(r)) => line("reason", r.clone()),
        _ => {}
    }
    line("entrypoint", j.entrypoint.clone());
    line("submitter", j.submitter.clone());
    line("queue", format!("{} (rule {}, config version {})", j.queue.as_deref().unwrap_or("-"), j.rule_index.map_or("-".into(), |r| r.to_string()), j.config_version.map_or("-".into(), |v| v.to_string())));
    line("priority", j.priority.to_string());
    let res: Vec<String> = j.resources.iter().map(|(k, v)| format!("{k}={v}")).collect();
    line("resources", if res.is_empty() { "-".into() } else { res.join(" ") });
    if !j.labels.is_empty() {
        line("labels", j.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "));
    }
    if !j.flavors.is_empty() {
        line("flavors", j.flavors.iter().map(|f| format!("{} ({})", f.flavor, f.resources.join(","))).collect::<Vec<_>>().join(" "));
    }
    if let Some(n) = &j.node {
        line("node", format!("{n} ({})", j.backend.as_deref().unwrap_or("?")));
    }
    for (name, ids) in [("after ok", &j.after_ok), ("after any", &j.after_any), ("after not ok", &j.after_not_ok), ("dependents", &j.dependents)] {
        if !ids.is_empty() {
            line(name, ids.join(" "));
        }
    }
    if let Some(by) = &j.held_by {
        line("held by", by.clone());
    }
    line("runs", format!("{} (retries {}/{})", j.runs, j.retries, j.max_retries));
    if let Some(c) = j.exit_code {
        line("exit code", c.to_string());
    }
    line("submitted", j.submitted_at.to_rfc3339());
    if let Some(t) = j.started_at {
        line("started", t.to_rfc3339());
    }
    if let Some(t) = j.finished_at {
        line("finished", t.to_rfc3339());
    }
    if !j.history.is_empty() {
        println!("history:");
        for e in &j.history {
            println!("  {}  {:<12} {}", e.at.format("%H:%M:%S%.3f"), e.kind, e.message);
        }
    }
}

/// `berth events`.
pub async fn run_events(cli: &Cli, args: &EventsArgs) -> Result<i32> {
    let mut q: Vec<(&str, String)> = vec![("max_items", args.max_items.to_string())];
    for (k, v) in [("kind", &args.kind), ("queue", &args.queue), ("job", &args.job), ("since", &args.since), ("cursor", &args.cursor)] {
        if let Some(v) = v {
            q.push((k, v.clone()));
        }
    }
    let outcome = cli.client().get_json::<EventPage>("/api/v1/events", &q).await.map(|page| show(args.output, &page, |page| {
            for e in &page.events {
                println!("{}  {:<15} {:<18} {}", e.at.format("%Y-%m-%d %H:%M:%S"), e.kind, e.job_id.as_deref().unwrap_or("-"), e.message);
            }
            if let Some(c) = &page.next_cursor {
                println!("more: --cursor {c}");
            }
        }));
    Ok(finish(outcome))
}

/// Runs a `stages` command.
pub async fn run_stages(cli: &Cli, command: &StagesCommand) -> Result<i32> {
    let client = cli.client();
    let outcome = match command {
        StagesCommand::Submit { file, output } => {
            let text = read_file(file)?;
            let req: StageRequest = serde_norway::from_str(&text).with_context(|| format!("{}: not a stage (name, jobs, parallelism)", file.display()))?;
            client.post_json::<StageCreated>("/api/v1/stages", &req).await.map(|created| show(*output, &created, |created| {
                    println!("{}", created.stage_id);
                    for r in &created.rejected {
                        eprintln!("  job {} ({}) rejected: {}", r.index, r.job_id, r.reason);
                    }
                }))
        }
        StagesCommand::Get { id, output } => client.get_json::<StageStatus>(&format!("/api/v1/stages/{}", encode(id)), &[]).await.map(|s| show(*output, &s, |s| {
                let counts: Vec<String> = s.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
                println!("{} ({}): {}{}", s.id, s.name, counts.join(" "), if s.done { ", done" } else { "" });
                for j in &s.jobs {
                    println!("  {:<18}  {:<10}  {}", j.id, j.state.as_str(), j.name);
                }
            })),
        StagesCommand::Cancel { id } => client.post_json::<StageStatus>(&format!("/api/v1/stages/{}/cancel", encode(id)), &json!({})).await.map(|s| {
            let counts: Vec<String> = s.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
            println!("{}: {}", s.id, counts.join(" "));
        }),
        StagesCommand::Results { id, output } => client.get_json::<StageResults>(&format!("/api/v1/stages/{}/results", encode(id)), &[]).await.map(|r| show(*output, &r, |r| {
                println!("{} ({}): {}", r.stage_id, r.stage_name, if r.success { "success" } else { r.error_message.as_deref().unwrap_or("failed") });
                for j in &r.job_statuses {
                    println!("  {:<18}  {:<10}  exit {:>4}  {}", j.job_id, j.status, j.return_code.map_or("-".into(), |c| c.to_string()), j.name);
                }
            })),
    };
    Ok(finish(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("python"), "python");
        assert_eq!(shell_quote("--lr=0.1"), "--lr=0.1");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn loopback_servers_are_on_this_host() {
        for s in ["http://127.0.0.1:3000", "http://localhost:3000", "http://[::1]:3000/", "http://127.0.0.2"] {
            assert!(is_local(s), "{s}");
        }
        for s in ["http://berth.example.com", "http://10.0.0.5:3000", "not a url"] {
            assert!(!is_local(s), "{s}");
        }
    }
}
