//! `/metrics` as an operator meets it: the real `berth` binary with real local jobs,
//! linted by `promtool check metrics` and scraped by a real Prometheus server (Debian's
//! `prometheus` package; `.ci/prometheus.sh install`), whose answer for a queue's pending
//! count must match the API's.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::berth::Berth;
use common::{wait_until, Backend};
use serde_json::{json, Value};

/// One queue, `small`, with 1 CPU of quota on the local flavor; only `team: small` routes.
const CONFIG: &str = r#"
resource_flavors:
  - name: local
resource_queues:
  - name: small
    resource_groups:
      - covered_resources: [cpu]
        flavors: [{name: local, resources: [{name: cpu, nominal_quota: 1}]}]
scheduling_rules:
  - resource_queue: small
    selector: [{key: team, operator: in, values: [small]}]
"#;

const SECS: fn(u64) -> Duration = Duration::from_secs;

/// The value of the sample `name{labels}` (labels in any order, no others), if present.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut want: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    want.sort();
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (n, rest) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.strip_suffix('}')?),
            None => (series, ""),
        };
        let mut have: Vec<String> = rest.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect();
        have.sort();
        (n == name && have == want).then(|| value.parse().ok())?
    })
}

/// A Prometheus server scraping one target every 200 ms, killed on drop.
struct Prometheus {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl Prometheus {
    fn start(dir: &std::path::Path, target: &str) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!("global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\nscrape_configs:\n  - job_name: berth\n    static_configs:\n      - targets: ['{target}']\n"),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("`prometheus` is on PATH (install it with .ci/prometheus.sh install)");
        Prometheus { child, url: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() }
    }

    /// The value of an instant query that selects one series; `Err` while there is none.
    async fn query_one(&self, promql: &str) -> Result<f64, String> {
        let r = self.http.get(format!("{}/api/v1/query", self.url)).query(&[("query", promql)]).send().await.map_err(|e| e.to_string())?;
        let body: Value = r.json().await.map_err(|e| e.to_string())?;
        let result = body["data"]["result"].as_array().ok_or_else(|| format!("no result: {body}"))?;
        match result.as_slice() {
            [one] => one["value"][1].as_str().and_then(|v| v.parse().ok()).ok_or_else(|| format!("bad value: {one}")),
            other => Err(format!("{} series for {promql}", other.len())),
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn scrape(b: &Berth) -> (u16, String, String) {
    let r = b.http.get(format!("{}/metrics", b.url)).send().await.unwrap();
    let ctype = r.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    (r.status().as_u16(), ctype, r.text().await.unwrap())
}

async fn pending_in_api(b: &Berth) -> f64 {
    let (status, q) = b.get("/api/v1/queues/small").await;
    assert_eq!(status, 200, "{q}");
    q["pending_count"].as_f64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_queues_usage_and_latencies() {
    // Authentication on: /metrics must still answer a scraper without credentials.
    let b = Berth::start_authenticated(Backend::Sqlite, "sss_berth_metricsadmin0000000000", &["--local-cpus", "8"]).await;
    b.apply(CONFIG).await;
    let sleeper = |n: u32| json!({"name": format!("sleeper-{n}"), "entrypoint": "sleep 120", "labels": {"team": "small"}, "resources": {"cpu": 1}});
    let ids = [b.submit(sleeper(1)).await, b.submit(sleeper(2)).await, b.submit(sleeper(3)).await];
    let (status, refused) = b.post("/api/v1/jobs", &json!({"entrypoint": "true", "labels": {"team": "nobody"}})).await;
    assert!((400..500).contains(&status), "a job no rule routes is refused: {status} {refused}");
    b.wait_state(&ids[0], &["running"], SECS(20)).await;

    let anonymous = reqwest::Client::new();
    let r = anonymous.get(format!("{}/metrics", b.url)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "/metrics needs no token");
    let (status, ctype, text) = scrape(&b).await;
    assert_eq!(status, 200);
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "Prometheus text format, got {ctype}");
    let q = [("queue", "small")];
    let replica = format!("127.0.0.1:{}", b.port);
    let cell = [("queue", "small"), ("flavor", "local"), ("resource", "cpu")];
    let expect = [
        ("berth_pending_jobs", &q[..], 2.0),
        ("berth_running_jobs", &q[..], 1.0),
        ("berth_admitted_jobs", &q[..], 0.0),
        ("berth_queue_nominal_quota", &cell[..], 1.0),
        ("berth_queue_resource_usage", &cell[..], 1.0),
        ("berth_queue_resource_borrowed", &cell[..], 0.0),
        ("berth_backend_in_flight_jobs", &[("backend", "local")][..], 1.0),
        ("berth_rejected_jobs_total", &[("queue", ""), ("reason", "no_rule_matches")][..], 1.0),
        ("berth_admission_wait_time_seconds_count", &q[..], 1.0),
        ("berth_admission_to_start_seconds_count", &[("queue", "small"), ("backend", "local")][..], 1.0),
        ("berth_http_request_duration_seconds_count", &[("route", "/api/v1/jobs"), ("method", "POST"), ("status", "201")][..], 3.0),
        ("berth_leader", &[("replica", replica.as_str())][..], 1.0),
        ("berth_active_config_version", &[][..], 2.0),
    ];
    for (name, labels, want) in expect {
        assert_eq!(sample(&text, name, labels), Some(want), "{name}{labels:?} in:\n{text}");
    }
    assert!(sample(&text, "berth_admission_cycle_duration_seconds_count", &[]).is_some_and(|n| n >= 1.0), "{text}");
    // A route's template, never the path itself (a job id would be a label value per job).
    assert!(text.contains(r#"route="/api/v1/jobs/{id}""#), "{text}");
    assert!(!text.contains(&ids[0]), "no job id in any label:\n{text}");

    // promtool's lint: names, units, _total on counters, HELP on every series.
    let lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("`promtool` is on PATH (install it with .ci/prometheus.sh install)");
    use std::io::Write;
    lint.stdin.as_ref().unwrap().write_all(text.as_bytes()).unwrap();
    let out = lint.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // A real Prometheus scrapes it and answers what the API says, also after a change.
    let prom = Prometheus::start(&b.dir, &format!("127.0.0.1:{}", b.port));
    let query = r#"berth_pending_jobs{job="berth",queue="small"}"#;
    let api = pending_in_api(&b).await;
    assert_eq!(api, 2.0);
    wait_until("Prometheus to report the queue's pending count", SECS(30), async || {
        let got = prom.query_one(query).await?;
        if got == api { Ok(()) } else { Err(format!("Prometheus says {got}, the API {api}")) }
    })
    .await;
    let (status, cancelled) = b.post(&format!("/api/v1/jobs/{}/cancel", ids[2]), &json!({})).await;
    assert_eq!(status, 200, "{cancelled}");
    let api = pending_in_api(&b).await;
    assert_eq!(api, 1.0);
    wait_until("Prometheus to see the cancel", SECS(30), async || {
        let got = prom.query_one(query).await?;
        if got == api { Ok(()) } else { Err(format!("Prometheus says {got}, the API {api}")) }
    })
    .await;
    let up = prom.query_one(r#"up{job="berth"}"#).await.unwrap();
    assert_eq!(up, 1.0, "the scrape succeeds");
}
