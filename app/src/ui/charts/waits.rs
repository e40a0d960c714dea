//! How long a queue's jobs waited and how many were admitted, over a range: per step of the
//! range (5 minutes up to two hours, else an hour), the median and 95th percentile of the
//! waits of the jobs admitted in it, and their number.

use std::collections::BTreeMap;

use charming::datatype::DataPoint;
use charming::element::{AreaStyle, ItemStyle, LineStyle, LineStyleType, Step};
use charming::series::Line;

use super::{entry, finish, time_chart, PALETTE, QUOTA_PALETTE};
use crate::api::ChartData;
use crate::jobs::Admissions;
use crate::ui::widgets::duration;

/// Ranges up to this long are cut into 5-minute steps, longer ones into hours.
const SHORT_RANGE_MS: i64 = 2 * 3600 * 1000;

/// The step of `[since, until)` in milliseconds, and its name ("5 minutes", "hour").
fn step(a: &Admissions) -> (i64, &'static str) {
    if (a.until - a.since).num_milliseconds() <= SHORT_RANGE_MS { (5 * 60 * 1000, "5 minutes") } else { (3600 * 1000, "hour") }
}

/// The waits of each step with an admission, keyed by the step's middle (ms), sorted.
fn by_step(a: &Admissions) -> BTreeMap<i64, Vec<f64>> {
    let (step_ms, _) = step(a);
    let since = a.since.timestamp_millis();
    let mut steps: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for x in &a.admissions {
        let i = (x.at.timestamp_millis() - since).div_euclid(step_ms);
        steps.entry(since + i * step_ms + step_ms / 2).or_default().push(x.wait_s);
    }
    for waits in steps.values_mut() {
        waits.sort_by(f64::total_cmp);
    }
    steps
}

/// The nearest-rank percentile `p` of `sorted` (as the usage report computes it).
pub fn percentile(sorted: &[f64], p: u64) -> Option<f64> {
    let n = sorted.len() as u64;
    (n > 0).then(|| sorted[((n * p).div_ceil(100)).max(1) as usize - 1])
}

/// The unit waits are drawn in: seconds, minutes or hours, by the longest p95.
fn wait_unit(longest_s: f64) -> (&'static str, f64) {
    if longest_s < 120.0 {
        ("seconds", 1.0)
    } else if longest_s < 2.0 * 3600.0 {
        ("minutes", 60.0)
    } else {
        ("hours", 3600.0)
    }
}

/// Wait before admission, p50 and p95 per step, with the whole range's in the caption.
pub fn waits(a: &Admissions) -> ChartData {
    let steps = by_step(a);
    let p = |q: u64| steps.iter().filter_map(move |(t, w)| percentile(w, q).map(|v| (*t, v))).collect::<Vec<_>>();
    let (p50, p95) = (p(50), p(95));
    let (unit, per) = wait_unit(p95.iter().map(|(_, v)| *v).fold(0.0, f64::max));
    let points = |s: &[(i64, f64)]| s.iter().map(|(t, v)| DataPoint::from(vec![*t as f64, v / per])).collect::<Vec<_>>();
    let line = |name: &str, colour: &str, dash: LineStyleType| {
        Line::new().name(name).show_symbol(true).item_style(ItemStyle::new().color(colour)).line_style(LineStyle::new().type_(dash).color(colour).width(2))
    };
    let chart = time_chart(a.since.timestamp_millis(), a.until.timestamp_millis(), unit)
        .series(line("median (p50)", PALETTE[0], LineStyleType::Solid).data(points(&p50)))
        .series(line("p95", QUOTA_PALETTE[3], LineStyleType::Dashed).data(points(&p95)));
    let mut all: Vec<f64> = a.admissions.iter().map(|x| x.wait_s).collect();
    all.sort_by(f64::total_cmp);
    let caption = match (percentile(&all, 50), percentile(&all, 95)) {
        (Some(m), Some(h)) => format!("Over the range: median {}, p95 {}, longest {} ({} admitted).", duration(m), duration(h), duration(*all.last().unwrap_or(&h)), all.len()),
        _ => String::new(),
    };
    ChartData {
        option: finish(&chart),
        points: p50.len() + p95.len(),
        step_s: step(a).0 as f64 / 1000.0,
        title: "Waiting time before admission".into(),
        legend: vec![entry("median (p50)", PALETTE[0], LineStyleType::Solid), entry("p95", QUOTA_PALETTE[3], LineStyleType::Dashed)],
        empty: "No job of this queue was admitted in this range.".into(),
        caption,
        ..Default::default()
    }
}

/// Jobs admitted per step, every step of the range drawn (none is 0) as a filled step line
/// (bars on a time axis widen the axis beyond the range).
pub fn admissions(a: &Admissions) -> ChartData {
    let (step_ms, step_name) = step(a);
    let (since, until) = (a.since.timestamp_millis(), a.until.timestamp_millis());
    let mut counts: BTreeMap<i64, f64> = (0..).map(|i| since + i * step_ms).take_while(|t| *t < until).map(|t| (t, 0.0)).collect();
    for x in &a.admissions {
        *counts.entry(since + (x.at.timestamp_millis() - since).div_euclid(step_ms) * step_ms).or_default() += 1.0;
    }
    // Each step's count holds from its start to the next; the last one's to the range's end.
    let last = counts.values().last().copied().unwrap_or(0.0);
    let data: Vec<DataPoint> = counts.iter().map(|(t, n)| (*t, *n)).chain([(until, last)]).map(|(t, n)| DataPoint::from(vec![t as f64, n])).collect();
    let name = format!("jobs admitted per {step_name}");
    let line = Line::new()
        .name(name.as_str())
        .show_symbol(false)
        .step(Step::End)
        .item_style(ItemStyle::new().color(PALETTE[2]))
        .line_style(LineStyle::new().color(PALETTE[2]).width(1))
        .area_style(AreaStyle::new().opacity(0.5))
        .data(data);
    let chart = time_chart(since, until, &format!("jobs per {step_name}")).series(line);
    ChartData {
        option: finish(&chart),
        points: a.admissions.len().min(counts.len()),
        step_s: step_ms as f64 / 1000.0,
        title: format!("Admissions per {step_name}"),
        legend: vec![entry(&name, PALETTE[2], LineStyleType::Solid)],
        empty: "No job of this queue was admitted in this range.".into(),
        caption: format!("{} admitted in the range.", a.admissions.len()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use chrono::{Duration, TimeZone, Utc};
    use serde_json::Value;

    use super::*;
    use crate::jobs::Admission;

    fn admissions_at(range_h: i64, waits: &[(i64, f64)]) -> Admissions {
        let since = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let admissions = waits.iter().map(|(min, w)| Admission { at: since + Duration::minutes(*min), wait_s: *w }).collect();
        Admissions { since, until: since + Duration::hours(range_h), admissions }
    }

    fn series(data: &ChartData) -> Vec<Value> {
        serde_json::from_str::<Value>(&data.option).unwrap()["series"].as_array().unwrap().clone()
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let w: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&w, 50), Some(10.0));
        assert_eq!(percentile(&w, 95), Some(19.0));
        assert_eq!(percentile(&w[..1], 95), Some(1.0));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn an_hour_is_cut_in_five_minute_steps_and_the_axis_spans_it() {
        let a = admissions_at(1, &[(1, 10.0), (2, 30.0), (3, 20.0), (40, 90.0)]);
        let chart = waits(&a);
        let s = series(&chart);
        let p50: Vec<(f64, f64)> = s[0]["data"].as_array().unwrap().iter().map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap())).collect();
        let start = a.since.timestamp_millis() as f64;
        assert_eq!(p50, vec![(start + 150_000.0, 20.0), (start + 8.0 * 300_000.0 + 150_000.0, 90.0)]);
        assert_eq!(s[1]["data"][0][1].as_f64(), Some(30.0));
        let option: Value = serde_json::from_str(&chart.option).unwrap();
        assert_eq!(option["xAxis"]["min"].as_f64(), Some(start));
        assert_eq!(option["xAxis"]["max"].as_f64(), Some(start + 3_600_000.0));
        assert_eq!(option["yAxis"]["name"], "seconds");
        assert!(chart.caption.contains("median 20 s"), "{}", chart.caption);
    }

    #[test]
    fn a_day_counts_admissions_per_hour_and_long_waits_are_in_minutes() {
        let a = admissions_at(24, &[(10, 600.0), (20, 900.0), (130, 60.0)]);
        let counts = admissions(&a);
        assert_eq!(counts.title, "Admissions per hour");
        let data: Vec<f64> = series(&counts)[0]["data"].as_array().unwrap().iter().map(|p| p[1].as_f64().unwrap()).collect();
        assert_eq!(data.len(), 25, "every hour of the day, and the end of the range");
        assert_eq!(&data[..3], &[2.0, 0.0, 1.0]);
        let w = waits(&a);
        let option: Value = serde_json::from_str(&w.option).unwrap();
        assert_eq!(option["yAxis"]["name"], "minutes");
        assert_eq!(series(&w)[1]["data"][0][1].as_f64(), Some(15.0));
    }

    #[test]
    fn no_admission_says_so() {
        let w = waits(&admissions_at(1, &[]));
        assert_eq!(w.points, 0);
        assert!(w.empty.contains("No job"));
        assert!(w.caption.is_empty());
    }
}
