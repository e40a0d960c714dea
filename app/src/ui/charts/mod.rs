//! Charts described with charming on the server. The browser only hands the option to
//! ECharts (served from `/pkg`), so the wasm bundle carries no chart model.

use std::collections::BTreeMap;

use charming::component::{Axis, Grid, Legend};
use charming::datatype::DataPoint;
use charming::element::{AreaStyle, AxisType, ItemStyle, LineStyle, LineStyleType, Tooltip, Trigger};
use charming::series::{Bar, Line};
use charming::Chart;

use crate::api::ChartData;
use crate::jobs::History;
use crate::preview::PreviewReport;

/// The palette, in series order: readable on white and told apart by people with common
/// colour-vision deficiencies.
const PALETTE: [&str; 8] = ["#2457c5", "#e07b00", "#1d7a46", "#b42318", "#7a3fb0", "#0f8b9e", "#8a5a00", "#5b6678"];

/// Usage over time. Unstacked: per queue × flavor × resource, a solid step line of use and a
/// dashed one of the nominal quota (absent when unlimited). Stacked: one area per queue,
/// summed per flavor × resource, for "who holds this flavor".
pub fn usage(history: &History, stacked: bool) -> ChartData {
    let mut series: BTreeMap<String, (Vec<DataPoint>, Vec<DataPoint>)> = BTreeMap::new();
    for s in &history.samples {
        let name = if stacked { s.queue.clone() } else { format!("{} · {} · {}", s.queue, s.flavor, s.resource) };
        let t = s.at.timestamp_millis() as f64;
        let entry = series.entry(name).or_default();
        entry.0.push(DataPoint::from(vec![t, s.used]));
        if let (false, Some(n)) = (stacked, s.nominal) {
            entry.1.push(DataPoint::from(vec![t, n]));
        }
    }
    let points = history.samples.len();
    // A range that starts before the first sample (a young server, a new queue) starts at the
    // first sample instead, so the data is not squeezed into the right edge.
    let first = history.samples.iter().map(|s| s.at.timestamp_millis()).min();
    let since = history.since.timestamp_millis();
    let x_min = first.map_or(since, |f| since.max(f - (history.step_s * 1000.0) as i64));
    let mut chart = Chart::new()
        .color(PALETTE.iter().map(|c| charming::element::Color::from(*c)).collect::<Vec<_>>())
        .tooltip(Tooltip::new().trigger(Trigger::Axis))
        .legend(Legend::new().type_(charming::component::LegendType::Scroll).top(0))
        .grid(Grid::new().left(48).right(24).top(36).bottom(32).contain_label(true))
        .x_axis(Axis::new().type_(AxisType::Time).min(x_min).max(history.until.timestamp_millis()).split_number(4))
        .y_axis(Axis::new().type_(AxisType::Value).name("in use"));
    for (i, (name, (used, nominal))) in series.into_iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut line = Line::new()
            .name(name.clone())
            .show_symbol(false)
            .step(charming::element::Step::End)
            .item_style(ItemStyle::new().color(colour))
            .line_style(LineStyle::new().color(colour).width(2))
            .data(used);
        if stacked {
            line = line.stack("usage").area_style(AreaStyle::new().opacity(0.35));
        }
        chart = chart.series(line);
        if !nominal.is_empty() {
            chart = chart.series(
                Line::new()
                    .name(format!("{name} quota"))
                    .show_symbol(false)
                    .step(charming::element::Step::End)
                    .item_style(ItemStyle::new().color(colour))
                    .line_style(LineStyle::new().type_(LineStyleType::Dashed).color(colour).width(1))
                    .data(nominal),
            );
        }
    }
    let option = serde_json::to_string(&chart).unwrap_or_else(|_| "{}".into());
    ChartData { option, points, step_s: history.step_s }
}

/// Wait p95 per queue in a preview, the active config's bar beside the draft's, in seconds.
/// Queues are named as the report's table names them.
pub fn preview_waits(report: &PreviewReport, label: impl Fn(&crate::preview::QueueImpact) -> String) -> ChartData {
    let rows: Vec<_> = report.queues.iter().filter(|q| q.queue.is_some() && q.active.jobs + q.draft.jobs > 0).collect();
    let names: Vec<String> = rows.iter().map(|q| label(q)).collect();
    let bar = |name: &str, colour: &str, values: Vec<f64>| {
        Bar::new().name(name).item_style(ItemStyle::new().color(colour)).data(values.into_iter().map(DataPoint::from).collect())
    };
    let chart = Chart::new()
        .tooltip(Tooltip::new().trigger(Trigger::Axis))
        .legend(Legend::new().top(0))
        .grid(Grid::new().left(48).right(16).top(32).bottom(24).contain_label(true))
        .x_axis(Axis::new().type_(AxisType::Category).data(names))
        .y_axis(Axis::new().type_(AxisType::Value).name("wait p95 (s)"))
        .series(bar("active", PALETTE[0], rows.iter().map(|q| q.active.wait_p95_s.unwrap_or(0.0)).collect()))
        .series(bar("draft", PALETTE[1], rows.iter().map(|q| q.draft.wait_p95_s.unwrap_or(0.0)).collect()));
    let option = serde_json::to_string(&chart).unwrap_or_else(|_| "{}".into());
    ChartData { option, points: rows.len() * 2, step_s: 0.0 }
}
