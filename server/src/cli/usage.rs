//! `berth usage`: the accounting report (like Slurm's `sreport`/`sacct`), as a table, JSON
//! or CSV.

use anyhow::Result;
use app::jobs::UsageReport;
use clap::{Args, ValueEnum};

use crate::cli::jobs::finish;
use crate::cli::{print_json, Cli};

/// Options of `berth usage`.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Group by `user`, `queue` or `label:KEY` (e.g. `label:team`).
    #[arg(long, default_value = "user")]
    by: String,
    /// Jobs that ended since: an RFC 3339 time or a duration ago (15m, 2h, 7d).
    #[arg(long, default_value = "7d")]
    since: String,
    /// … and before this time (default: now).
    #[arg(long)]
    until: Option<String>,
    #[arg(short, long, value_enum, default_value = "text")]
    output: UsageOutput,
}

/// How `berth usage` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UsageOutput {
    Text,
    Json,
    Csv,
}

/// Runs `berth usage`.
pub async fn run_usage(cli: &Cli, args: &UsageArgs) -> Result<i32> {
    let mut q: Vec<(&str, String)> = vec![("by", args.by.clone()), ("since", args.since.clone())];
    if let Some(u) = &args.until {
        q.push(("until", u.clone()));
    }
    let outcome = cli.client().get_json::<UsageReport>("/api/v1/usage", &q).await.map(|r| match args.output {
        UsageOutput::Json => print_json(&r),
        UsageOutput::Csv => print!("{}", r.to_csv()),
        UsageOutput::Text => print_table(&r),
    });
    Ok(finish(outcome))
}

fn print_table(r: &UsageReport) {
    println!("jobs that ended {} .. {} (UTC), by {}", r.since.format("%Y-%m-%d %H:%M"), r.until.format("%Y-%m-%d %H:%M"), r.by);
    println!("{:<20}  {:>6}  {:>6}  {:>6}  {:>9}  {:>9}  {:>10}  {:>8}  {:>8}  {:>8}  {:>7}", "GROUP", "OK", "FAILED", "OTHER", "CPU-H", "GPU-H", "MEM-GB-H", "WAIT-P50", "WAIT-P95", "WAIT-MAX", "PREEMPT");
    let secs = |v: Option<f64>| v.map_or("-".to_string(), |s| format!("{s:.1}s"));
    for row in &r.rows {
        let n = |s: &str| row.jobs.get(s).copied().unwrap_or(0);
        let other: u64 = row.jobs.values().sum::<u64>() - n("succeeded") - n("failed");
        println!(
            "{:<20}  {:>6}  {:>6}  {:>6}  {:>9.3}  {:>9.3}  {:>10.3}  {:>8}  {:>8}  {:>8}  {:>7}",
            row.group,
            n("succeeded"),
            n("failed"),
            other,
            row.cpu_hours,
            row.gpu_hours,
            row.memory_gb_hours,
            secs(row.wait_p50_s),
            secs(row.wait_p95_s),
            secs(row.wait_max_s),
            row.preemptions
        );
    }
}
