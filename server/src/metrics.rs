//! Berth's Prometheus series: one registry per server, the instruments the admission loop,
//! the job service and the HTTP layer record into, and the gauges refreshed at each scrape
//! from the loop's live state (`http/metrics.rs` serves them at `/metrics`).
//!
//! Names follow the Prometheus conventions (base units in the name, `_total` on counters)
//! and Kueue's where Kueue has one (`kueue_pending_workloads` → `berth_pending_jobs`).
//! Every label takes values from a bounded set: queue, flavor and resource names from the
//! config, backend names, a fixed list of causes and reasons, route templates (not paths).

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Wait times from seconds to a day: jobs wait for quota, sometimes for hours.
const WAIT_BUCKETS: &[f64] = &[0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 4.0 * 3600.0, 86400.0];

/// An admission cycle or an API request: well under a millisecond to seconds.
const FAST_BUCKETS: &[f64] = &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// Every series Berth exports.
pub struct Metrics {
    registry: Registry,
    /// Time from enqueue (or requeue after a preemption: the original enqueue time) to
    /// admission, by queue.
    pub admission_wait: HistogramVec,
    /// Time from admission to the backend's start returning, by queue and backend.
    pub admission_to_start: HistogramVec,
    /// One admission cycle of the loop that decided something.
    pub cycle: Histogram,
    /// Jobs preempted, by the victim's queue and cause (within_queue, reclaim, borrow).
    pub preemptions: IntCounterVec,
    /// Jobs refused at submit, by queue (empty when none routes) and reason code.
    pub rejections: IntCounterVec,
    /// Backend calls that failed, by backend and operation (start, stop).
    pub backend_errors: IntCounterVec,
    /// API and dashboard requests by route template, method and status.
    pub http: HistogramVec,
    /// Gauges set at scrape time from the loop's state.
    pub(crate) pending: IntGaugeVec,
    pub(crate) admitted: IntGaugeVec,
    pub(crate) running: IntGaugeVec,
    pub(crate) nominal: GaugeVec,
    pub(crate) usage: GaugeVec,
    pub(crate) borrowed: GaugeVec,
    pub(crate) in_flight: IntGaugeVec,
    pub(crate) leader: IntGaugeVec,
    pub(crate) config_version: Gauge,
    /// One scrape at a time refreshes and reads the gauges.
    pub(crate) scrape: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: &[f64], labels: &[&str]) -> HistogramVec {
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels).expect("valid histogram");
    registry.register(Box::new(h.clone())).expect("registered once");
    h
}

fn counter(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter");
    registry.register(Box::new(c.clone())).expect("registered once");
    c
}

fn int_gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge");
    registry.register(Box::new(g.clone())).expect("registered once");
    g
}

fn gauge(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
    let g = GaugeVec::new(Opts::new(name, help), labels).expect("valid gauge");
    registry.register(Box::new(g.clone())).expect("registered once");
    g
}

impl Metrics {
    /// A fresh registry with every series registered (none has a sample yet).
    pub fn new() -> Metrics {
        let r = Registry::new();
        let cell = &["queue", "flavor", "resource"];
        let config_version = Gauge::new("berth_active_config_version", "Version of the scheduler config in force.").expect("valid gauge");
        r.register(Box::new(config_version.clone())).expect("registered once");
        Metrics {
            admission_wait: histogram(
                &r,
                "berth_admission_wait_time_seconds",
                "Time from a job's enqueue to its admission, by queue.",
                WAIT_BUCKETS,
                &["queue"],
            ),
            admission_to_start: histogram(
                &r,
                "berth_admission_to_start_seconds",
                "Time from a job's admission to its backend reporting it started.",
                WAIT_BUCKETS,
                &["queue", "backend"],
            ),
            cycle: histogram(&r, "berth_admission_cycle_duration_seconds", "Duration of one admission cycle that had something to do.", FAST_BUCKETS, &[])
                .with_label_values::<&str>(&[]),
            preemptions: counter(&r, "berth_preempted_jobs_total", "Jobs preempted, by the victim's queue and cause.", &["queue", "cause"]),
            rejections: counter(&r, "berth_rejected_jobs_total", "Jobs refused at submit, by queue and reason.", &["queue", "reason"]),
            backend_errors: counter(&r, "berth_backend_errors_total", "Backend calls that failed, by backend and operation.", &["backend", "operation"]),
            http: histogram(
                &r,
                "berth_http_request_duration_seconds",
                "API and dashboard requests, by route template, method and status code.",
                FAST_BUCKETS,
                &["route", "method", "status"],
            ),
            pending: int_gauge(&r, "berth_pending_jobs", "Jobs waiting for admission, by queue.", &["queue"]),
            admitted: int_gauge(&r, "berth_admitted_jobs", "Jobs admitted and not yet started by their backend, by queue.", &["queue"]),
            running: int_gauge(&r, "berth_running_jobs", "Jobs running on a backend, by queue.", &["queue"]),
            nominal: gauge(&r, "berth_queue_nominal_quota", "A queue's nominal quota per flavor and resource (absent: unlimited).", cell),
            usage: gauge(&r, "berth_queue_resource_usage", "What admitted and running jobs of a queue hold, per flavor and resource.", cell),
            borrowed: gauge(&r, "berth_queue_resource_borrowed", "The part of a queue's usage above its nominal quota, borrowed in its cohort.", cell),
            in_flight: int_gauge(&r, "berth_backend_in_flight_jobs", "Jobs admitted to or running on a backend.", &["backend"]),
            leader: int_gauge(&r, "berth_leader", "1 on the replica that runs the admission loop, 0 on the others.", &["replica"]),
            config_version,
            registry: r,
            scrape: tokio::sync::Mutex::new(()),
        }
    }

    /// Every series in the Prometheus text exposition format (version 0.0.4).
    pub fn encode(&self) -> String {
        let mut out = Vec::new();
        // Writing to a Vec fails only on a bad metric family, which registration rules out.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::warn!(error = %e, "cannot encode the metrics");
        }
        String::from_utf8(out).unwrap_or_default()
    }

    /// The content type of [`Metrics::encode`]'s text.
    pub fn content_type() -> &'static str {
        prometheus::TEXT_FORMAT
    }
}

/// Seconds between two times in µs (0 when `to` is before `from`).
pub fn seconds_between(from_us: i64, to_us: i64) -> f64 {
    (to_us.saturating_sub(from_us)).max(0) as f64 / 1e6
}
