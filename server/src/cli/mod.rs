//! The `berth` command line: `serve`, and the `config` commands that talk to a server over
//! HTTP (except `validate`, which runs the shared validator offline).
//!
//! Read commands print a table or YAML for people and take `-o json` for scripts. Exit codes:
//! 0 success, 1 the request failed or the config is invalid, 2 bad usage (from clap).

pub mod array;
pub mod auth;
pub mod client;
pub mod db;
pub mod jobs;
pub mod preview;
pub mod queues;
pub mod usage;
pub mod wait;

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use app::config::diff::ConfigDiff;
use app::config::validate::validate_text;
use app::config::yaml::to_canonical_yaml;
use app::config::Report;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::cli::jobs::{run_events, run_jobs, run_stages, EventsArgs, JobsCommand, StagesCommand};
use crate::cli::queues::{run_cohorts, run_nodes, run_queues};
use crate::cli::client::{Client, ClientError};

/// The version and the commit the binary was built from.
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("BERTH_COMMIT"), ")");

/// Berth: a resource scheduler for ML and batch teams.
#[derive(Debug, Parser)]
#[command(name = "berth", version = VERSION, about)]
pub struct Cli {
    /// Server to talk to.
    #[arg(long, global = true, env = "BERTH_SERVER", default_value = "http://127.0.0.1:3000")]
    pub server: String,
    /// API token (`berth tokens create` makes one; the first admin token is printed when
    /// the server first starts). Not needed when the server runs with `--anonymous`.
    #[arg(long, global = true, env = "BERTH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API and the dashboard.
    Serve(ServeArgs),
    /// Print the version and the commit this binary was built from.
    Version,
    /// Read, apply, diff and roll back the scheduler config.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Submit, list, inspect, follow, cancel and re-prioritise jobs.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// Queues: usage vs quota, pending and running counts; with a name, its jobs in order.
    Queues {
        name: Option<String>,
        /// Why pending jobs wait in full, instead of the one-line headline.
        #[arg(long)]
        full_reason: bool,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Cohorts: the quota their queues pool, what is borrowed and idle; with a name, each member's use and share.
    Cohorts {
        /// A cohort: also each member's use, borrowed and lent quota, and share.
        name: Option<String>,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Nodes of every backend with capacity, free resources and the flavors selecting them.
    Nodes {
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// The event log: admissions, preemptions, rejections, timeouts, config applies…
    Events(EventsArgs),
    /// Batches of jobs with a concurrency limit (seed 002's stages).
    #[command(subcommand)]
    Stages(StagesCommand),
    /// API tokens: create (the secret is shown once), list, revoke. Admins only.
    #[command(subcommand)]
    Tokens(TokensCommand),
    /// The audit log: config applies and rollbacks, token changes, cancels, priority
    /// changes, sign-ins. Admins only.
    Audit(AuditArgs),
    /// Accounting: jobs by final state, CPU/GPU/memory-hours, waits and preemptions per
    /// user, queue or label over a time range (`-o csv` for spreadsheets).
    Usage(crate::cli::usage::UsageArgs),
    /// Back up and restore the SQLite database (opens it directly, like `serve`).
    #[command(subcommand)]
    Db(crate::cli::db::DbCommand),
    /// Who the server takes you for, and your role.
    Whoami {
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
}

/// `berth tokens …`.
#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Create a token for USER with ROLE; prints the secret (only now, never again).
    Create {
        /// Whom the token identifies (recorded as submitter and config author).
        #[arg(long)]
        user: String,
        /// viewer, submitter, editor or admin.
        #[arg(long)]
        role: String,
        /// A note to tell tokens apart, e.g. "CI" or "laptop".
        #[arg(long)]
        label: Option<String>,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Every token (revoked ones too), newest first.
    List {
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Revoke token ID: refused from its next request on, its dashboard sessions end.
    Revoke {
        id: String,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
}

/// `berth audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this action (config.apply, config.rollback, token.create, token.revoke,
    /// job.cancel, job.priority, session.signin).
    #[arg(long)]
    pub action: Option<String>,
    /// Only this user's actions.
    #[arg(long)]
    pub actor: Option<String>,
    #[arg(long, default_value_t = 50)]
    pub max_items: i64,
    #[arg(long)]
    pub cursor: Option<String>,
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

impl Cli {
    /// A client of the server named on the command line.
    pub fn client(&self) -> Client {
        Client::new(&self.server, self.token.clone())
    }

    /// Runs any command but `serve`; returns the process exit code.
    pub async fn run_client_command(&self) -> Result<i32> {
        match &self.command {
            Command::Serve(_) => bail!("`serve` is not a client command"),
            Command::Version => {
                println!("berth {VERSION}");
                Ok(0)
            }
            Command::Config(c) => run_config(self, c).await,
            Command::Jobs(c) => run_jobs(self, c).await,
            Command::Queues { name, full_reason, output } => run_queues(self, name.as_deref(), *full_reason, *output).await,
            Command::Cohorts { name, output } => run_cohorts(self, name.as_deref(), *output).await,
            Command::Nodes { output } => run_nodes(self, *output).await,
            Command::Events(args) => run_events(self, args).await,
            Command::Stages(c) => run_stages(self, c).await,
            Command::Tokens(c) => crate::cli::auth::run_tokens(self, c).await,
            Command::Audit(args) => crate::cli::auth::run_audit(self, args).await,
            Command::Usage(args) => crate::cli::usage::run_usage(self, args).await,
            Command::Db(c) => crate::cli::db::run_db(c).await,
            Command::Whoami { output } => crate::cli::auth::run_whoami(self, *output).await,
        }
    }
}

/// Options of `berth serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "BERTH_ADDR", default_value = "127.0.0.1:3000")]
    pub addr: SocketAddr,
    /// Database: sqlite://PATH (created when missing) or postgres://USER:PASS@HOST/DB.
    #[arg(long, env = "BERTH_DATABASE_URL", default_value = "sqlite://data/berth.db")]
    pub database_url: String,
    /// Directory with the dashboard's static files (pkg/berth.js, .wasm, .css), instead of
    /// those built into the binary (for development). Default: the built-in ones; for a
    /// binary built without them, `site/` next to its build directory, else ./target/site.
    #[arg(long, env = "BERTH_SITE_ROOT")]
    pub site_root: Option<PathBuf>,
    /// Where runs keep their logs and default working directories.
    #[arg(long, env = "BERTH_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,
    /// Do not run jobs on this host (only on other backends).
    #[arg(long)]
    pub no_local: bool,
    /// Run nothing on this host, only pretend to: the local node is offered as the
    /// `--local-*` options say, and a job whose entrypoint is `sleep N` "runs" for N seconds,
    /// any other ends at once, all with code 0 and no output. For load tests of the
    /// scheduler and trying a config at scale (as kwok does for Kubernetes).
    #[arg(long, conflicts_with = "no_local")]
    pub simulate: bool,
    /// CPUs the local backend offers (default: the host's cores).
    #[arg(long, env = "BERTH_LOCAL_CPUS")]
    pub local_cpus: Option<f64>,
    /// Memory in GB the local backend offers (default: the host's memory).
    #[arg(long, env = "BERTH_LOCAL_MEMORY_GB")]
    pub local_memory_gb: Option<f64>,
    /// GPUs the local backend offers (default: 0).
    #[arg(long, env = "BERTH_LOCAL_GPUS")]
    pub local_gpus: Option<f64>,
    /// Another resource of the local host, `NAME=AMOUNT` (repeatable).
    #[arg(long = "local-resource", value_name = "NAME=AMOUNT")]
    pub local_resources: Vec<String>,
    /// The local backend's node name (default: the host's name). Replicas on one host
    /// share it, and their data dir, so each can adopt the others' local runs.
    #[arg(long, env = "BERTH_LOCAL_NODE")]
    pub local_node: Option<String>,
    /// A label of the local host for flavor selectors, `KEY=VALUE` (repeatable; default
    /// `backend=local`, which is always set).
    #[arg(long = "local-label", value_name = "KEY=VALUE")]
    pub local_labels: Vec<String>,
    /// Seconds between SIGTERM and SIGKILL when a local run is stopped.
    #[arg(long, default_value_t = 5.0)]
    pub kill_grace_s: f64,
    /// A Ray cluster as a backend, `NAME=DASHBOARD_URL` (repeatable), e.g.
    /// `ray=http://127.0.0.1:8265`. Its nodes' `backend` is NAME.
    #[arg(long = "ray", value_name = "NAME=URL")]
    pub ray: Vec<String>,
    /// Token of a Ray cluster with token auth, `NAME=TOKEN` (repeatable); else the
    /// environment variable BERTH_RAY_TOKEN_<NAME> (upper case, `-` as `_`).
    #[arg(long = "ray-token", value_name = "NAME=TOKEN", hide_env_values = true)]
    pub ray_tokens: Vec<String>,
    /// Most runs admitted or running at once on each Ray cluster.
    #[arg(long, default_value_t = 20)]
    pub ray_max_in_flight: usize,
    /// How often each running Ray job's status is read, in milliseconds (less often when
    /// that would pass 50 requests a second to the cluster).
    #[arg(long, default_value_t = 100)]
    pub ray_poll_ms: u64,
    /// How often each Ray cluster's node list and usage report are read, in milliseconds
    /// (at least 500). Ray's usage report itself lags by about 5 s.
    #[arg(long, default_value_t = 2000)]
    pub ray_nodes_ms: u64,
    /// Leave finished jobs in Ray. By default Berth saves a finished run's log (its last
    /// 8 MiB) and Ray's record in the data dir and deletes the job from Ray, whose history
    /// of finished jobs otherwise grows until the cluster restarts.
    #[arg(long)]
    pub ray_keep_finished: bool,
    /// This server's URL as the Ray clusters' nodes reach it, e.g. `http://berth:3000`.
    /// Each run then reports its exit there the moment its command ends (with `curl`, or
    /// Python when the node has no curl), so Berth records the end and starts the next job
    /// without waiting for its status poll. Ray shows such a run's entrypoint wrapped in a
    /// few lines that send the report. Without it, ends are found by polling.
    #[arg(long, env = "BERTH_RAY_CALLBACK_URL", value_name = "URL")]
    pub ray_callback_url: Option<String>,
    /// A Slurm cluster as a backend, `NAME=SLURM_CONF` (repeatable), e.g.
    /// `hpc=/etc/slurm/slurm.conf`; `NAME=` uses the environment's SLURM_CONF. Runs are
    /// batch jobs submitted with Slurm's commands (`sbatch`, `squeue`, `scontrol`,
    /// `scancel`, `sacct`), which must be on PATH. Its nodes' `backend` is NAME.
    #[arg(long = "slurm", value_name = "NAME=SLURM_CONF")]
    pub slurm: Vec<String>,
    /// Most runs admitted or running at once on each Slurm cluster.
    #[arg(long, default_value_t = 50)]
    pub slurm_max_in_flight: usize,
    /// How often the running Slurm jobs' states are read (one `squeue` for all), in
    /// milliseconds (at least 50).
    #[arg(long, default_value_t = 250)]
    pub slurm_poll_ms: u64,
    /// How often each Slurm cluster's node list is read, in milliseconds (at least 500).
    #[arg(long, default_value_t = 2000)]
    pub slurm_nodes_ms: u64,
    /// Submit the tasks of one array (`jobs submit --array`) that Berth starts together as
    /// one Slurm job array. Off by default: on the test cluster it was slower than a batch
    /// job per task (docs/slurm.md, "Arrays").
    #[arg(long)]
    pub slurm_arrays: bool,
    /// Where Slurm runs keep their script and logs (`DIR/NAME/{run}/`): a directory the
    /// cluster's nodes see at the same path. Default: `slurm/` in the data dir.
    #[arg(long, value_name = "DIR")]
    pub slurm_run_dir: Option<PathBuf>,
    /// Period of the admission loop's tick (timeouts, retry backoff), in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub tick_ms: u64,
    /// First retry delay in milliseconds (doubled per retry, at most 5 minutes).
    #[arg(long, default_value_t = 1000)]
    pub retry_backoff_ms: u64,
    /// Resource-history sample period in seconds while anything is in use.
    #[arg(long, default_value_t = 10)]
    pub sample_interval_s: u64,
    /// Days of resource history kept.
    #[arg(long, default_value_t = 14)]
    pub history_days: u64,
    /// Anonymous local mode: callers without credentials act as an admin named
    /// `anonymous`. Only allowed on a loopback address (`make run` uses it).
    #[arg(long, env = "BERTH_ANONYMOUS")]
    pub anonymous: bool,
    /// A directory jobs may use as `working_dir`, with everything under it (repeatable).
    /// Default: the home directory and the system temp dir; `/` allows any.
    #[arg(long = "workdir-root", value_name = "DIR")]
    pub workdir_roots: Vec<PathBuf>,
    /// Mark the session cookie `Secure` (set this when a TLS proxy fronts Berth; it is also
    /// set for requests that arrive with `X-Forwarded-Proto: https`).
    #[arg(long)]
    pub secure_cookies: bool,
    /// Largest package (a `ray job submit --working-dir` upload) accepted, in MiB.
    #[arg(long, default_value_t = 100)]
    pub package_max_mb: u64,
    /// Hours an uploaded package is kept after it was last used, unless an unfinished job
    /// names it.
    #[arg(long, default_value_t = 24)]
    pub package_keep_hours: u64,
    /// This replica's name, shown as the leader by `/readyz` and the dashboard when several
    /// `berth serve` share one PostgreSQL database. Default: HOSTNAME:PORT.
    #[arg(long, env = "BERTH_REPLICA_NAME")]
    pub replica_name: Option<String>,
    /// Milliseconds the leader lease holds unrenewed (PostgreSQL replicas): the leader
    /// renews it three times as often; a follower takes over once it lapses.
    #[arg(long, default_value_t = 3000)]
    pub lease_ms: u64,
}

/// Output format of read commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Human-readable (a table, YAML or text).
    Text,
    Yaml,
    Json,
}

/// `berth config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Apply a config file (YAML or JSON; `-` reads standard input) as the new active version.
    Apply {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        #[arg(short, long)]
        message: Option<String>,
        /// Refuse (409) unless this is still the active version.
        #[arg(long)]
        expected_version: Option<i64>,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Print the active config, or version N.
    Get {
        #[arg(long)]
        version: Option<i64>,
        #[arg(short, long, value_enum, default_value = "yaml")]
        output: Output,
    },
    /// List versions, newest first.
    Versions {
        #[arg(long, default_value_t = 10)]
        max_items: i64,
        /// Continue after a page (the `next cursor` printed before).
        #[arg(long)]
        cursor: Option<String>,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Show what changed from version A to version B.
    Diff {
        a: i64,
        b: i64,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Restore version N as a new version.
    Rollback {
        version: i64,
        #[arg(short, long)]
        message: Option<String>,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// What a draft would have done to the recorded workload, next to the active config.
    Preview {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Recorded workload to replay: the last DURATION (24h, 90m, 7d).
        #[arg(long, default_value = "24h")]
        window: String,
        /// Changed jobs listed at most.
        #[arg(long, default_value_t = 20)]
        max_changes: usize,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
    },
    /// Validate a config file offline with the server's own rules (`--server`: on the
    /// running server, which also compares quotas and flavors with its nodes).
    Validate {
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
        /// Ask the running server, which knows the nodes: also warns about flavors that
        /// select no node and quotas above what the selected nodes have.
        #[arg(long = "server-check")]
        server_check: bool,
    },
}

/// Runs a `config` command; returns the process exit code.
pub async fn run_config(cli: &Cli, command: &ConfigCommand) -> Result<i32> {
    let client = cli.client();
    let outcome = match command {
        ConfigCommand::Validate { file, output, server_check: false } => return validate_file(file, *output),
        ConfigCommand::Validate { file, output, server_check: true } => {
            let text = read_file(file)?;
            match client.validate(&text).await {
                Ok(report) => return Ok(show_report(file, &report, *output)),
                Err(e) => Err(e),
            }
        }
        ConfigCommand::Apply { file, message, expected_version, output } => {
            let text = read_file(file)?;
            client.apply(&text, message.as_deref(), *expected_version).await.map(|r| {
                if *output == Output::Json {
                    print_json(&r);
                } else {
                    let note = if r.changed { "" } else { " (no change: identical to the previous version)" };
                    println!("applied version {}{note}", r.version);
                    r.warnings.iter().for_each(|w| println!("  {w}"));
                }
            })
        }
        ConfigCommand::Preview { file, window, max_changes, output } => {
            let text = read_file(file)?;
            client.preview(&text, window).await.map(|r| match output {
                Output::Json => print_json(&r),
                Output::Yaml => print!("{}", serde_norway::to_string(&r).unwrap_or_default()),
                Output::Text => crate::cli::preview::print(&r, *max_changes),
            })
        }
        ConfigCommand::Get { version, output } => client.get(*version).await.map(|v| {
            if let Some(note) = &v.not_in_force {
                eprintln!("warning: {note}");
            }
            match output {
                Output::Json => print_json(&v),
                Output::Yaml | Output::Text => print!("{}", to_canonical_yaml(&v.config)),
            }
        }),
        ConfigCommand::Versions { max_items, cursor, output } => {
            client.versions(*max_items, cursor.as_deref()).await.map(|page| match output {
                Output::Json => print_json(&page),
                Output::Yaml => print!("{}", serde_norway::to_string(&page).unwrap_or_default()),
                Output::Text => print_versions(&page),
            })
        }
        ConfigCommand::Diff { a, b, output } => client.diff(*a, *b).await.map(|d| match output {
            Output::Json => print_json(&d),
            Output::Yaml => print!("{}", serde_norway::to_string(&d).unwrap_or_default()),
            Output::Text => print_diff(&d),
        }),
        ConfigCommand::Rollback { version, message, output } => {
            client.rollback(*version, message.as_deref()).await.map(|r| match output {
                Output::Json => print_json(&r),
                _ => println!("restored version {version} as version {}", r.version),
            })
        }
    };
    Ok(match outcome {
        Ok(()) => 0,
        Err(e) => {
            report_error(&e);
            1
        }
    })
}

/// Exits on a command line clap refused. clap's tip for an argument that looks like a
/// negative number ("to pass '-1' as a value, use '-- -1'") is wrong here: after `--` comes
/// the job's command. Berth says where negative numbers go instead.
pub fn usage_error(e: clap::Error) -> ! {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let arg = match (e.kind(), e.get(ContextKind::InvalidArg)) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(arg))) => arg.clone(),
        _ => e.exit(),
    };
    if arg.parse::<f64>().is_err() {
        e.exit();
    }
    eprintln!(
        "error: unexpected argument `{arg}`: this command takes no number there. Negative numbers are \
         accepted right after the option or place that takes them (`--priority {arg}`, \
         `berth jobs priority ID {arg}`); anything after `--` is the job's command.\n\n\
         For more information, try '--help'."
    );
    std::process::exit(2);
}

pub(crate) fn read_file(path: &PathBuf) -> Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("cannot read standard input")?;
        return Ok(text);
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

fn validate_file(path: &PathBuf, output: Output) -> Result<i32> {
    let text = read_file(path)?;
    let (_, report) = validate_text(&text);
    Ok(show_report(path, &report, output))
}

/// Prints a validation report; the exit code (1 when it has errors).
fn show_report(path: &std::path::Path, report: &Report, output: Output) -> i32 {
    if output == Output::Json {
        print_json(&serde_json::json!({ "valid": !report.has_errors(), "problems": report.problems }));
    } else {
        print_report(report);
        if !report.has_errors() {
            println!("{}: valid", path.display());
        }
    }
    if report.has_errors() { 1 } else { 0 }
}

fn print_report(report: &Report) {
    for p in report.errors().chain(report.warnings()) {
        println!("{p}");
    }
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

fn print_versions(page: &app::api::VersionPage) {
    println!("{:>8}  {:<20}  {:<16}  MESSAGE", "VERSION", "APPLIED (UTC)", "BY");
    for v in &page.versions {
        let marker = if v.is_active { "*" } else { " " };
        println!(
            "{:>7}{marker}  {:<20}  {:<16}  {}",
            v.version,
            v.created_at.format("%Y-%m-%d %H:%M:%S"),
            v.creator_id,
            v.message.as_deref().unwrap_or("")
        );
    }
    if let Some(c) = &page.next_cursor {
        println!("more: --cursor {c}");
    }
}

fn print_diff(d: &ConfigDiff) {
    if d.identical {
        println!("identical");
        return;
    }
    for c in &d.changes {
        println!("{:<9} {}", format!("{:?}", c.kind).to_lowercase(), c.summary);
    }
    println!();
    print!("{}", d.unified);
}

pub(crate) fn report_error(e: &ClientError) {
    eprintln!("error: {e}");
    if let ClientError::Api(body, _) = e {
        if let Ok(report) = serde_json::from_value::<Report>(body.error.details.clone()) {
            report.problems.iter().for_each(|p| eprintln!("  {p}"));
        }
    }
}
