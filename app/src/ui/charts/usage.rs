//! Usage over time, one chart per resource so each has its unit. Unstacked: per queue and
//! flavor, a solid step line of use and a dashed one of its quota. Stacked: one area per
//! queue, with the sum of their quotas and the capacity of the nodes the flavors select.

use std::collections::{BTreeMap, BTreeSet};

use charming::datatype::DataPoint;
use charming::element::{AreaStyle, ItemStyle, LineStyle, LineStyleType, Step};
use charming::series::Line;
use charming::Chart;

use super::{entry, finish, resource_rank, resource_words, time_chart, CAPACITY_COLOUR, PALETTE, QUOTA_PALETTE};
use crate::api::{ChartData, LegendEntry};
use crate::jobs::{History, Sample};

/// What the nodes the charted flavors select hold now, per resource (drawn on the stacked
/// view as a flat line: capacity is not recorded over time).
pub type Capacity = BTreeMap<String, f64>;

/// One chart per resource in `history`, CPU first. An empty history still gives one chart
/// (of `resource`, or CPU) that says no sample was recorded yet.
pub fn usage(history: &History, stacked: bool, capacity: &Capacity) -> Vec<ChartData> {
    let mut by_resource: BTreeMap<(u8, String), Vec<&Sample>> = BTreeMap::new();
    for s in &history.samples {
        let (rank, _) = resource_rank(&s.resource);
        by_resource.entry((rank, s.resource.clone())).or_default().push(s);
    }
    if by_resource.is_empty() {
        return vec![empty_chart(history, "cpu")];
    }
    let charts: Vec<ChartData> = by_resource
        .into_iter()
        .map(|((_, resource), samples)| {
            if stacked {
                stacked_chart(history, &resource, &samples, capacity.get(&resource).copied())
            } else {
                lines_chart(history, &resource, &samples)
            }
        })
        .collect();
    drop_idle(charts)
}

/// Only the charts with something drawn, the first naming the series of the others ("a ·
/// local (GPU)"); when none has anything, the first one, naming every series left out
/// (rather than one empty chart per resource).
fn drop_idle(charts: Vec<ChartData>) -> Vec<ChartData> {
    if charts.iter().any(|c| c.points > 0) {
        let dropped: Vec<String> = charts.iter().filter(|c| c.points == 0).flat_map(|c| c.hidden.iter().map(|h| format!("{h} ({})", c.title))).collect();
        let mut kept: Vec<ChartData> = charts.into_iter().filter(|c| c.points > 0).collect();
        kept[0].hidden.extend(dropped);
        return kept;
    }
    let hidden: std::collections::BTreeSet<String> = charts.iter().flat_map(|c| c.hidden.iter().cloned()).collect();
    charts.into_iter().take(1).map(|c| ChartData { hidden: hidden.iter().cloned().collect(), ..c }).collect()
}

/// A chart with no data, which says so in words.
fn empty_chart(history: &History, resource: &str) -> ChartData {
    let (title, unit) = resource_words(resource);
    let chart = time_chart(history.since.timestamp_millis(), history.until.timestamp_millis(), &unit);
    ChartData {
        option: finish(&chart),
        step_s: history.step_s,
        title,
        empty: "No usage recorded in this range yet: samples are taken while jobs hold quota.".into(),
        ..Default::default()
    }
}

/// One queue × flavor's samples: use, quota, and whether it was ever in use.
#[derive(Default)]
struct Points {
    used: Vec<(i64, f64)>,
    quota: Vec<(i64, f64)>,
    in_use: bool,
}

/// Per queue × flavor: use (solid) and quota (dashed, darker), all-zero ones left out.
fn lines_chart(history: &History, resource: &str, samples: &[&Sample]) -> ChartData {
    let mut series: BTreeMap<String, Points> = BTreeMap::new();
    for s in samples {
        let e = series.entry(format!("{} · {}", s.queue, s.flavor)).or_default();
        let t = s.at.timestamp_millis();
        e.used.push((t, s.used));
        if let Some(n) = s.nominal {
            e.quota.push((t, n));
        }
        e.in_use |= s.used != 0.0;
    }
    let (title, unit) = resource_words(resource);
    let mut chart = time_chart(history.since.timestamp_millis(), history.until.timestamp_millis(), &unit);
    let (mut legend, mut hidden, mut points) = (Vec::new(), Vec::new(), 0);
    let until = history.until.timestamp_millis();
    for (name, Points { used, quota: nominal, in_use }) in series {
        if !in_use {
            hidden.push(name);
            continue;
        }
        let i = legend.iter().filter(|e: &&LegendEntry| e.line == "solid").count() % PALETTE.len();
        points += used.len();
        chart = chart.series(step_line(&name, PALETTE[i], LineStyleType::Solid, 2.0).data(to_end(used, until)));
        legend.push(entry(&name, PALETTE[i], LineStyleType::Solid));
        if !nominal.is_empty() {
            let quota = format!("{name} quota");
            chart = chart.series(step_line(&quota, QUOTA_PALETTE[i], LineStyleType::Dashed, 2.0).data(to_end(nominal, until)));
            legend.push(entry(&quota, QUOTA_PALETTE[i], LineStyleType::Dashed));
        }
    }
    finished(history, chart, title, legend, hidden, points)
}

/// One stacked area per queue (its flavors summed), on the buckets of the history's step so
/// the areas stack point by point; then the sum of the queues' quotas and the capacity.
fn stacked_chart(history: &History, resource: &str, samples: &[&Sample], capacity: Option<f64>) -> ChartData {
    let grid = Buckets::new(history);
    let mut queues: BTreeMap<String, BTreeMap<i64, (f64, Option<f64>)>> = BTreeMap::new();
    for s in samples {
        // The store downsampled on the same steps: one sample per queue, flavor and step.
        let cell = queues.entry(s.queue.clone()).or_default().entry(grid.index(s.at.timestamp_millis())).or_insert((0.0, Some(0.0)));
        cell.0 += s.used;
        cell.1 = cell.1.zip(s.nominal).map(|(a, n)| a + n);
    }
    let buckets: BTreeSet<i64> = queues.values().flat_map(|q| q.keys().copied()).collect();
    let (title, unit) = resource_words(resource);
    let (since, until) = (history.since.timestamp_millis(), history.until.timestamp_millis());
    let mut chart = time_chart(since, until, &unit);
    let (mut legend, mut hidden, mut points) = (Vec::new(), Vec::new(), 0);
    // The quotas of the queues that have one (an unlimited queue adds nothing, and the
    // line's name says it leaves them out).
    let mut quota_sum: BTreeMap<i64, f64> = buckets.iter().map(|b| (*b, 0.0)).collect();
    let mut unlimited = false;
    for (queue, cells) in &queues {
        let filled = carry_forward(cells, &buckets);
        for (b, (_, n)) in &filled {
            *quota_sum.entry(*b).or_default() += n.unwrap_or(0.0);
            unlimited |= n.is_none();
        }
        if filled.values().all(|(u, _)| *u == 0.0) {
            hidden.push(queue.clone());
            continue;
        }
        let colour = PALETTE[legend.len() % PALETTE.len()];
        let data: Vec<(i64, f64)> = filled.iter().map(|(b, (u, _))| (grid.time(*b), *u)).collect();
        points += data.len();
        let data = to_end(data, until);
        chart = chart.series(step_line(queue, colour, LineStyleType::Solid, 1.0).stack("usage").area_style(AreaStyle::new().opacity(0.45)).data(data));
        legend.push(entry(queue, colour, LineStyleType::Solid));
    }
    if points > 0 && quota_sum.values().any(|q| *q > 0.0) {
        let name = if unlimited { "quota (sum of the limited queues)" } else { "quota (sum of the queues)" };
        let data = to_end(quota_sum.iter().map(|(b, n)| (grid.time(*b), *n)).collect(), until);
        chart = chart.series(step_line(name, QUOTA_PALETTE[3], LineStyleType::Dashed, 2.0).data(data));
        legend.push(entry(name, QUOTA_PALETTE[3], LineStyleType::Dashed));
    }
    if let (true, Some(cap)) = (points > 0, capacity) {
        let name = "capacity (nodes now)";
        let data = vec![DataPoint::from(vec![since as f64, cap]), DataPoint::from(vec![until as f64, cap])];
        chart = chart.series(step_line(name, CAPACITY_COLOUR, LineStyleType::Dotted, 2.0).data(data));
        legend.push(entry(name, CAPACITY_COLOUR, LineStyleType::Dotted));
    }
    finished(history, chart, title, legend, hidden, points)
}

/// The history's range cut into steps: samples go to the step they fall in, drawn at its start.
struct Buckets {
    since_ms: i64,
    step_ms: i64,
}

impl Buckets {
    fn new(history: &History) -> Buckets {
        Buckets { since_ms: history.since.timestamp_millis(), step_ms: ((history.step_s * 1000.0) as i64).max(1) }
    }

    fn index(&self, at_ms: i64) -> i64 {
        (at_ms - self.since_ms).div_euclid(self.step_ms)
    }

    fn time(&self, index: i64) -> i64 {
        self.since_ms + index * self.step_ms
    }
}

/// A queue's cells on every bucket of `buckets`: 0 before its first sample, then its last
/// value until the next (a step with no sample of it kept the same use).
fn carry_forward(cells: &BTreeMap<i64, (f64, Option<f64>)>, buckets: &BTreeSet<i64>) -> BTreeMap<i64, (f64, Option<f64>)> {
    let first_quota = cells.values().next().and_then(|c| c.1);
    let mut last = (0.0, first_quota);
    buckets
        .iter()
        .map(|b| {
            if let Some(c) = cells.get(b) {
                last = *c;
            }
            (*b, last)
        })
        .collect()
}

/// The points for ECharts, the last value carried on to `until_ms`: samples are written when
/// use changes (and periodically while anything is in use), so no sample since means no change.
fn to_end(mut points: Vec<(i64, f64)>, until_ms: i64) -> Vec<DataPoint> {
    if let Some(&(t, v)) = points.last() {
        if t < until_ms {
            points.push((until_ms, v));
        }
    }
    points.into_iter().map(|(t, v)| DataPoint::from(vec![t as f64, v])).collect()
}

fn step_line(name: &str, colour: &str, dash: LineStyleType, width: f64) -> Line {
    Line::new()
        .name(name)
        .show_symbol(false)
        .step(Step::End)
        .item_style(ItemStyle::new().color(colour))
        .line_style(LineStyle::new().type_(dash).color(colour).width(width))
}

fn finished(history: &History, chart: Chart, title: String, legend: Vec<LegendEntry>, hidden: Vec<String>, points: usize) -> ChartData {
    let empty = if points > 0 {
        String::new()
    } else if hidden.is_empty() {
        "No usage recorded in this range yet: samples are taken while jobs hold quota.".into()
    } else {
        "Nothing was in use in this range.".into()
    };
    ChartData { option: finish(&chart), points, step_s: history.step_s, title, legend, hidden, empty, caption: String::new() }
}

#[cfg(test)]
mod tests;
