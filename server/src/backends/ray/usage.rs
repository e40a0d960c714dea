//! What work Berth did not start takes on a Ray cluster: Ray's reported usage minus Berth's
//! own runs, so the engine does not admit onto capacity another user's jobs hold.
//!
//! Ray reports usage in `/api/cluster_status` (`loadMetricsReport.usageByNode`, each entry
//! `[used, total]`, resource names camelCased), refreshed by its monitor about every 5 s and
//! stamped with the time it was taken (`clusterStatus.time`). That usage counts every job,
//! Berth's included, as they were at that time, while Berth's own accounting is current. The
//! rule, per node and resource:
//!
//! ```text
//! berth_then = the most Berth's runs on the node held at any moment of [T − SLACK, T + SLACK]
//! outside    = max(0, used_reported_at_T − berth_then)
//! free       = total − berth_now − outside      (= total − max(berth_now, berth_now + outside))
//! ```
//!
//! A run counts as Berth's from just before its submission until Berth sees it end (or sees
//! Ray forget it), and stays in the [`Ledger`] a while after, so a report taken before a run
//! ended still finds it. Taking the *most* Berth held around `T` means a run started or
//! finished near the report time is always taken as Berth's, never also as someone else's: the
//! error of the rule is only ever to see less outside work than there is (for at most one
//! report, the jobs then wait in Ray's own queue), never to hold Berth back for its own jobs.
//! Outside work that ended is still counted until the next report (about 5 s). A report older
//! than [`STALE_US`] counts nothing (Ray's monitor is not updating).

use std::collections::HashMap;

use serde_json::Value;

use crate::engine::{Milli, Name, Resources};

/// How far a report's time and Berth's clock may disagree: clock skew between the hosts,
/// the raylet's resource-report period, the placement of a just-submitted job.
pub const SLACK_US: i64 = 2_000_000;

/// A report older than this is ignored.
pub const STALE_US: i64 = 60_000_000;

/// How long an ended run is remembered: past any report still in use that could count it.
const KEEP_US: i64 = STALE_US + SLACK_US;

/// Ray's usage report, converted to Berth's node ids and resource names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// When Ray took it (µs since the epoch, Ray's clock).
    pub at_us: i64,
    /// Used amounts (everything, Berth's runs included) per Berth node id.
    pub used: HashMap<Name, Resources>,
}

/// One of Berth's runs on the cluster, while it holds and for a while after.
#[derive(Debug, Clone)]
struct Held {
    node: Name,
    request: Resources,
    from_us: i64,
    until_us: Option<i64>,
}

/// Berth's runs on one cluster, by submission id.
#[derive(Debug, Default)]
pub struct Ledger {
    runs: HashMap<String, Held>,
}

impl Ledger {
    /// A run submitted (or adopted after a restart) at `from_us`, placed on `node`.
    pub fn hold(&mut self, key: String, node: Name, request: Resources, from_us: i64) {
        self.runs.insert(key, Held { node, request, from_us, until_us: None });
    }

    /// Ray says where the run really is (its driver's node).
    pub fn placed(&mut self, key: &str, node: &str) {
        if let Some(h) = self.runs.get_mut(key) {
            if *h.node != *node {
                h.node = node.into();
            }
        }
    }

    /// The run was seen to end at `now_us`; forgets runs that ended long ago.
    pub fn release(&mut self, key: &str, now_us: i64) {
        if let Some(h) = self.runs.get_mut(key) {
            h.until_us.get_or_insert(now_us);
        }
        self.runs.retain(|_, h| h.until_us.is_none_or(|u| u >= now_us - KEEP_US));
    }

    /// The most Berth's runs held on `node` at any moment of `[t0, t1]`, per resource.
    pub fn peak(&self, node: &str, t0: i64, t1: i64) -> Resources {
        let runs: Vec<&Held> =
            self.runs.values().filter(|h| *h.node == *node && h.from_us <= t1 && h.until_us.is_none_or(|u| u >= t0)).collect();
        // What is held only changes when a run starts, so its maximum is at t0 or at a start.
        let mut moments: Vec<i64> = runs.iter().map(|h| h.from_us).filter(|&f| f > t0).collect();
        moments.push(t0);
        let mut peak: HashMap<Name, Milli> = HashMap::new();
        for &t in &moments {
            let mut at: HashMap<&Name, Milli> = HashMap::new();
            for h in runs.iter().filter(|h| h.from_us <= t && h.until_us.is_none_or(|u| u >= t)) {
                for (r, a) in h.request.iter() {
                    let e = at.entry(r).or_default();
                    *e = e.plus(a);
                }
            }
            for (r, a) in at {
                let e = peak.entry(r.clone()).or_default();
                *e = (*e).max(a);
            }
        }
        Resources::new(peak)
    }

    /// Runs remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.runs.len()
    }
}

/// What work Berth did not start uses on `node`, from the report and the ledger (the rule
/// of this module); empty when the report is missing or stale.
pub fn outside(report: Option<&Report>, ledger: &Ledger, node: &str, now_us: i64) -> Resources {
    let Some(report) = report.filter(|r| now_us - r.at_us <= STALE_US) else { return Resources::default() };
    let Some(used) = report.used.get(node) else { return Resources::default() };
    let ours = ledger.peak(node, report.at_us - SLACK_US, report.at_us + SLACK_US);
    Resources::new(used.iter().map(|(r, a)| (r.clone(), a.minus(ours.get(r)).max(Milli::ZERO))))
}

/// The report in a `/api/cluster_status` body, `None` when it has no per-node usage.
/// `names(ray_node_id)` gives Berth's node id and, per camelCased Ray resource key, Berth's
/// name for it and the factor to Berth's unit.
pub fn parse_report<'a>(body: &Value, names: impl Fn(&str) -> Option<(Name, &'a [(String, Name, f64)])>) -> Option<Report> {
    let status = body.pointer("/data/clusterStatus")?;
    let at_us = (status.get("time")?.as_f64()? * 1e6) as i64;
    let by_node = status.pointer("/loadMetricsReport/usageByNode")?.as_object()?;
    let mut used = HashMap::new();
    for (ray_id, usage) in by_node {
        let Some((node, keys)) = names(ray_id) else { continue };
        let amounts = keys.iter().filter_map(|(camel, name, factor)| {
            let x = usage.get(camel)?.get(0)?.as_f64()?;
            Some((name.clone(), Milli::from_f64(x * factor)?))
        });
        used.insert(node, Resources::new(amounts));
    }
    Some(Report { at_us, used })
}

/// The key `/api/cluster_status` uses for a Ray resource name: Ray's `to_camel_case`, which
/// splits at `_` and title-cases every part after the first (Python's `str.title`:
/// `accel_h100` → `accelH100`, `node:__internal_head__` → `node:InternalHead`).
pub fn camel_case(name: &str) -> String {
    let mut parts = name.split('_');
    let mut out = parts.next().unwrap_or_default().to_string();
    for part in parts {
        let mut after_letter = false;
        for c in part.chars() {
            if c.is_alphabetic() {
                if after_letter {
                    out.extend(c.to_lowercase());
                } else {
                    out.extend(c.to_uppercase());
                }
                after_letter = true;
            } else {
                out.push(c);
                after_letter = false;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const S: i64 = 1_000_000;

    fn cpu(n: i64) -> Resources {
        Resources::units(&[("cpu", n)])
    }

    #[test]
    fn camel_case_is_rays() {
        assert_eq!(camel_case("CPU"), "CPU");
        assert_eq!(camel_case("accel_h100"), "accelH100");
        assert_eq!(camel_case("object_store_memory"), "objectStoreMemory");
        assert_eq!(camel_case("node:__internal_head__"), "node:InternalHead");
        assert_eq!(camel_case("my_TPU_v4x"), "myTpuV4X");
    }

    #[test]
    fn the_report_is_read_per_node_under_berth_names() {
        let body = json!({"data": {"clusterStatus": {"time": 1796301312.5, "loadMetricsReport": {
            "usage": {"CPU": [2.0, 4.0]},
            "usageByNode": {"9177abc": {"CPU": [2.0, 4.0], "accelH100": [1.0, 2.0], "memory": [1073741824.0, 1.6e10]},
                            "other": {"CPU": [1.0, 1.0]}}}}}});
        let keys = vec![
            ("CPU".to_string(), Name::from("cpu"), 1.0),
            ("accelH100".to_string(), Name::from("accel_h100"), 1.0),
            ("memory".to_string(), Name::from("memory_gb"), 1.0 / (1u64 << 30) as f64),
        ];
        let report = parse_report(&body, |id| (id == "9177abc").then(|| (Name::from("ray:9177abc"), keys.as_slice()))).unwrap();
        assert_eq!(report.at_us, 1_796_301_312_500_000);
        assert_eq!(report.used.len(), 1, "a node not in the node list is left out");
        assert_eq!(report.used["ray:9177abc"], Resources::units(&[("cpu", 2), ("accel_h100", 1), ("memory_gb", 1)]));
        assert!(parse_report(&json!({"data": {}}), |_| None).is_none());
    }

    #[test]
    fn outside_work_is_what_ray_reports_beyond_berths_runs_around_the_report_time() {
        let t = 1000 * S;
        let report = Report { at_us: t, used: HashMap::from([(Name::from("n"), cpu(3))]) };
        let mut ledger = Ledger::default();
        // Nothing of Berth's: all of it is someone else's.
        assert_eq!(outside(Some(&report), &ledger, "n", t + S), cpu(3));
        // A run Berth holds since before the report: Ray's 3 include it.
        ledger.hold("a".into(), "n".into(), cpu(1), t - 10 * S);
        assert_eq!(outside(Some(&report), &ledger, "n", t + S), cpu(2));
        // One that ended after the report was taken was still in Ray's figure.
        ledger.hold("b".into(), "n".into(), cpu(1), t - 10 * S);
        ledger.release("b", t + 3 * S);
        assert_eq!(outside(Some(&report), &ledger, "n", t + 4 * S), cpu(1));
        // One submitted just after (skew): taken as Berth's, never counted twice.
        ledger.hold("c".into(), "n".into(), cpu(1), t + S);
        assert_eq!(outside(Some(&report), &ledger, "n", t + 4 * S), cpu(0));
        // Submitted well after the report: Ray could not have seen it.
        ledger.hold("d".into(), "n".into(), cpu(1), t + 3 * S);
        assert_eq!(outside(Some(&report), &ledger, "n", t + 4 * S), cpu(0));
        // Another node, a stale report, no report: nothing.
        assert_eq!(outside(Some(&report), &ledger, "m", t + S), Resources::default());
        assert_eq!(outside(Some(&report), &ledger, "n", t + STALE_US + S), Resources::default());
        assert_eq!(outside(None, &ledger, "n", t), Resources::default());
    }

    #[test]
    fn berths_share_is_its_peak_not_the_sum_of_every_run_in_the_window() {
        let t = 1000 * S;
        let mut ledger = Ledger::default();
        // Four one-CPU runs one after the other around the report: one at a time.
        for (i, from) in [t - 2 * S, t - S, t, t + S].into_iter().enumerate() {
            ledger.hold(format!("r{i}"), "n".into(), cpu(1), from);
            ledger.release(&format!("r{i}"), from + S / 2);
        }
        assert_eq!(ledger.peak("n", t - SLACK_US, t + SLACK_US), cpu(1));
        let report = Report { at_us: t, used: HashMap::from([(Name::from("n"), cpu(3))]) };
        assert_eq!(outside(Some(&report), &ledger, "n", t + S), cpu(2));
    }

    #[test]
    fn ended_runs_are_forgotten_after_a_while_and_ray_placement_moves_a_run() {
        let mut ledger = Ledger::default();
        ledger.hold("a".into(), "n".into(), cpu(1), 0);
        ledger.release("a", S);
        ledger.hold("b".into(), "n".into(), cpu(2), 0);
        ledger.placed("b", "m");
        assert_eq!(ledger.peak("m", 0, S), cpu(2));
        assert_eq!(ledger.peak("n", 0, S), cpu(1));
        ledger.release("b", S + KEEP_US + 1);
        assert_eq!(ledger.len(), 1, "a forgotten, b just ended");
    }
}
