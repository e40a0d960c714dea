use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::Value;

use super::*;

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

/// A sample `secs` after the start.
fn sample(secs: i64, queue: &str, resource: &str, used: f64, nominal: Option<f64>) -> Sample {
    Sample { at: start() + Duration::seconds(secs), queue: queue.into(), flavor: "local".into(), resource: resource.into(), used, nominal, borrowed: 0.0 }
}

/// The last hour, in 12 s steps, of `samples`.
fn hour(samples: Vec<Sample>) -> History {
    History { since: start(), until: start() + Duration::hours(1), step_s: 12.0, samples }
}

fn option(chart: &ChartData) -> Value {
    serde_json::from_str(&chart.option).unwrap()
}

fn names(chart: &ChartData) -> Vec<String> {
    option(chart)["series"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn the_time_axis_is_the_whole_range_even_when_samples_start_late() {
    let charts = usage(&hour(vec![sample(3000, "a", "cpu", 1.0, Some(2.0)), sample(3040, "a", "cpu", 2.0, Some(2.0))]), false, &Capacity::new());
    let x = &option(&charts[0])["xAxis"];
    assert_eq!(x["min"].as_i64(), Some(start().timestamp_millis()));
    assert_eq!(x["max"].as_i64(), Some((start() + Duration::hours(1)).timestamp_millis()));
    assert_eq!(x["axisLabel"]["hideOverlap"], true);
}

#[test]
fn a_quota_has_its_own_colour_and_dash() {
    let charts = usage(&hour(vec![sample(10, "a", "cpu", 1.0, Some(2.0))]), false, &Capacity::new());
    let series = option(&charts[0])["series"].as_array().unwrap().clone();
    let (used, quota) = (&series[0], &series[1]);
    assert_eq!(used["name"], "a · local");
    assert_eq!(quota["name"], "a · local quota");
    assert_eq!(quota["data"][1], serde_json::json!([start().timestamp_millis() as f64 + 3_600_000.0, 2.0]), "carried on to the end");
    assert_ne!(used["lineStyle"]["color"], quota["lineStyle"]["color"]);
    assert_eq!(quota["lineStyle"]["type"], "dashed");
    assert_ne!(used["lineStyle"]["type"], "dashed");
    assert_eq!(charts[0].legend.iter().map(|e| (e.name.as_str(), e.line.as_str())).collect::<Vec<_>>(), vec![("a · local", "solid"), ("a · local quota", "dashed")]);
}

#[test]
fn series_that_stay_at_zero_are_hidden_and_named() {
    let h = hour(vec![sample(10, "busy", "cpu", 1.0, Some(2.0)), sample(10, "idle", "cpu", 0.0, Some(2.0)), sample(20, "idle", "cpu", 0.0, Some(2.0))]);
    let charts = usage(&h, false, &Capacity::new());
    assert_eq!(names(&charts[0]), vec!["busy · local", "busy · local quota"]);
    assert_eq!(charts[0].hidden, vec!["idle · local"]);
    let idle = usage(&hour(vec![sample(10, "idle", "cpu", 0.0, Some(2.0))]), false, &Capacity::new());
    assert_eq!(idle[0].points, 0);
    assert_eq!(idle[0].empty, "Nothing was in use in this range.");
}

#[test]
fn one_chart_per_resource_with_its_unit() {
    let h = hour(vec![sample(10, "a", "memory_gb", 4.0, None), sample(10, "a", "gpu", 1.0, None), sample(10, "a", "cpu", 1.0, None), sample(10, "a", "tpu", 1.0, None)]);
    let charts = usage(&h, false, &Capacity::new());
    let words: Vec<(String, String)> = charts.iter().map(|c| (c.title.clone(), option(c)["yAxis"]["name"].as_str().unwrap().to_string())).collect();
    let expected = [("CPU", "CPUs"), ("GPU", "GPUs"), ("Memory", "GB"), ("tpu", "tpu")];
    assert_eq!(words, expected.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>());
}

#[test]
fn nothing_recorded_gives_one_chart_that_says_so() {
    let charts = usage(&hour(vec![]), false, &Capacity::new());
    assert_eq!(charts.len(), 1);
    assert_eq!(charts[0].points, 0);
    assert!(charts[0].empty.starts_with("No usage recorded in this range yet"));
}

#[test]
fn the_stack_shares_its_steps_and_carries_quota_and_capacity_lines() {
    // `b` has no sample in the second step: it kept its use, so it is carried forward.
    let h = hour(vec![
        sample(1, "a", "cpu", 1.0, Some(2.0)),
        sample(1, "b", "cpu", 2.0, Some(3.0)),
        sample(13, "a", "cpu", 2.0, Some(2.0)),
        sample(1, "idle", "cpu", 0.0, Some(1.0)),
    ]);
    let capacity = Capacity::from([("cpu".to_string(), 8.0)]);
    let charts = usage(&h, true, &capacity);
    let o = option(&charts[0]);
    let series = o["series"].as_array().unwrap();
    let data = |name: &str| -> Vec<(i64, f64)> {
        let s = series.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no series {name}"));
        s["data"].as_array().unwrap().iter().map(|p| (p[0].as_f64().unwrap() as i64, p[1].as_f64().unwrap())).collect()
    };
    let t0 = start().timestamp_millis();
    // Each carried on to the end of the range: no sample since means no change.
    let end = t0 + 3_600_000;
    assert_eq!(data("a"), vec![(t0, 1.0), (t0 + 12_000, 2.0), (end, 2.0)]);
    assert_eq!(data("b"), vec![(t0, 2.0), (t0 + 12_000, 2.0), (end, 2.0)]);
    assert_eq!(series.iter().find(|s| s["name"] == "a").unwrap()["stack"], "usage");
    assert_eq!(data("quota (sum of the queues)"), vec![(t0, 6.0), (t0 + 12_000, 6.0), (end, 6.0)]);
    assert_eq!(data("capacity (nodes now)"), vec![(t0, 8.0), (t0 + 3_600_000, 8.0)]);
    assert_eq!(charts[0].hidden, vec!["idle"]);
}

#[test]
fn an_unlimited_queue_is_left_out_of_the_quota_sum_and_the_line_says_so() {
    let h = hour(vec![sample(1, "a", "cpu", 1.0, Some(2.0)), sample(1, "open", "cpu", 1.0, None)]);
    let charts = usage(&h, true, &Capacity::new());
    let o = option(&charts[0]);
    let quota = o["series"].as_array().unwrap().iter().find(|s| s["name"] == "quota (sum of the limited queues)").expect("a quota line");
    assert_eq!(quota["data"][0][1].as_f64(), Some(2.0));
}

#[test]
fn idle_resources_get_no_chart_of_their_own() {
    let h = hour(vec![sample(1, "a", "cpu", 1.0, Some(2.0)), sample(1, "a", "gpu", 0.0, Some(1.0))]);
    let charts = usage(&h, false, &Capacity::new());
    assert_eq!(charts.iter().map(|c| c.title.as_str()).collect::<Vec<_>>(), vec!["CPU"]);
    assert_eq!(charts[0].hidden, vec!["a · local (GPU)"]);
    let idle = usage(&hour(vec![sample(1, "a", "cpu", 0.0, Some(2.0)), sample(1, "b", "gpu", 0.0, Some(1.0))]), false, &Capacity::new());
    assert_eq!(idle.len(), 1);
    assert_eq!(idle[0].hidden, vec!["a · local", "b · local"]);
}
