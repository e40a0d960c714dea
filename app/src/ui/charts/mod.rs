//! Charts described with charming on the server. The browser only hands the option to
//! ECharts (served from `/pkg`), so the wasm bundle carries no chart model. Each chart comes
//! with its legend, drawn by the page, and the names of the series it left out.

mod usage;
mod waits;

use charming::component::{Axis, Grid, Legend};
use charming::datatype::DataPoint;
use charming::element::{AxisType, Color, ItemStyle, LineStyleType, Tooltip, Trigger};
use charming::series::Bar;
use charming::Chart;
use serde_json::{json, Value};

use crate::api::{ChartData, LegendEntry};
use crate::preview::PreviewReport;

pub use usage::{usage, Capacity};
pub use waits::{admissions, waits};

/// The palette, in series order: readable on white and told apart by people with common
/// colour-vision deficiencies. No red: red is for trouble.
const PALETTE: [&str; 8] = ["#2457c5", "#e07b00", "#1d7a46", "#c2185b", "#7a3fb0", "#0f8b9e", "#8a5a00", "#5b6678"];

/// The quota of the series of the same index: a darker shade of its hue, drawn dashed, so a
/// quota is told from its usage by colour and by dash, and still read as its pair.
const QUOTA_PALETTE: [&str; 8] = ["#0d2b6e", "#7a4200", "#0b3d21", "#6d0e33", "#3d1a5e", "#064650", "#453000", "#1f2530"];

/// The colour of a capacity line (drawn dotted).
const CAPACITY_COLOUR: &str = "#5b6678";

/// How a chart names a resource, and the unit on its axis: `cpu` is "CPU" counted in CPUs,
/// `memory_gb` is "Memory" in GB; any other resource is named and counted as itself.
pub fn resource_words(resource: &str) -> (String, String) {
    match resource {
        "cpu" => ("CPU".into(), "CPUs".into()),
        "gpu" => ("GPU".into(), "GPUs".into()),
        "memory_gb" | "memory" => ("Memory".into(), "GB".into()),
        other => (other.to_string(), other.to_string()),
    }
}

/// Where resources come in a list of charts: CPU, GPU, memory, then the rest by name.
fn resource_rank(resource: &str) -> (u8, &str) {
    match resource {
        "cpu" => (0, ""),
        "gpu" => (1, ""),
        "memory_gb" | "memory" => (2, ""),
        other => (3, other),
    }
}

/// A chart with a time axis that spans exactly `[since_ms, until_ms]`, the y axis named by
/// `unit`, and no legend of its own (the page draws it).
fn time_chart(since_ms: i64, until_ms: i64, unit: &str) -> Chart {
    Chart::new()
        .tooltip(Tooltip::new().trigger(Trigger::Axis))
        .legend(Legend::new())
        .grid(Grid::new().left(8).right(20).top(32).bottom(8).contain_label(true))
        .x_axis(Axis::new().type_(AxisType::Time).min(since_ms).max(until_ms).split_number(4))
        .y_axis(Axis::new().type_(AxisType::Value).name(unit))
}

/// The option as JSON, with what charming does not describe: the legend hidden (its
/// selection still toggles series), time labels that skip rather than overlap, and the
/// axis name aligned over the labels rather than cut at the edge.
fn finish(chart: &Chart) -> String {
    let mut option = serde_json::to_value(chart).unwrap_or_else(|_| json!({}));
    if let Some(o) = option.as_object_mut() {
        o.insert("legend".into(), json!({ "show": false }));
        o.insert("animation".into(), json!(false));
        for axis in ["xAxis", "yAxis"] {
            for a in axes(o.get_mut(axis)) {
                a["axisLabel"] = json!({ "hideOverlap": true });
                a["nameTextStyle"] = json!({ "align": "left" });
            }
        }
    }
    option.to_string()
}

fn axes(v: Option<&mut Value>) -> Vec<&mut Value> {
    match v {
        Some(Value::Array(list)) => list.iter_mut().collect(),
        Some(v @ Value::Object(_)) => vec![v],
        _ => Vec::new(),
    }
}

fn entry(name: &str, colour: &str, line: LineStyleType) -> LegendEntry {
    let line = match line {
        LineStyleType::Solid => "solid",
        LineStyleType::Dashed => "dashed",
        LineStyleType::Dotted => "dotted",
    };
    LegendEntry { name: name.to_string(), colour: colour.to_string(), line: line.into() }
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
        .color(PALETTE.iter().map(|c| Color::from(*c)).collect::<Vec<_>>())
        .tooltip(Tooltip::new().trigger(Trigger::Axis))
        .legend(Legend::new().top(0))
        .grid(Grid::new().left(48).right(16).top(32).bottom(24).contain_label(true))
        .x_axis(Axis::new().type_(AxisType::Category).data(names))
        .y_axis(Axis::new().type_(AxisType::Value).name("wait p95 (s)"))
        .series(bar("active", PALETTE[0], rows.iter().map(|q| q.active.wait_p95_s.unwrap_or(0.0)).collect()))
        .series(bar("draft", PALETTE[1], rows.iter().map(|q| q.draft.wait_p95_s.unwrap_or(0.0)).collect()));
    let option = serde_json::to_string(&chart).unwrap_or_else(|_| "{}".into());
    ChartData { option, points: rows.len() * 2, ..Default::default() }
}
