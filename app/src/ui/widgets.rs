//! Small pieces shared by the pages: times in the viewer's zone, problem lists, error boxes.

use chrono::{DateTime, Utc};
use leptos::prelude::*;

use crate::config::{Report, Severity};

/// A UTC instant shown in the viewer's local time once the page is hydrated (UTC before).
#[component]
pub fn LocalTime(at: DateTime<Utc>) -> impl IntoView {
    let text = RwSignal::new(at.format("%Y-%m-%d %H:%M:%S UTC").to_string());
    // Effects run only in the browser, where chrono knows the viewer's time zone.
    Effect::new(move |_| text.set(at.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S").to_string()));
    view! { <time datetime=at.to_rfc3339() title=at.to_rfc3339()>{move || text.get()}</time> }
}

/// Every problem of a report, errors first, with a count summary.
#[component]
pub fn ProblemList(#[prop(into)] report: Signal<Report>) -> impl IntoView {
    let counts = move || {
        let r = report.get();
        (r.errors().count(), r.warnings().count())
    };
    view! {
        <div class="problems" data-testid="problems">
            <p class="problem-summary" data-testid="problem-summary">
                {move || match counts() {
                    (0, 0) => view! { <span class="badge ok">"No problems"</span> }.into_any(),
                    (e, w) => view! {
                        <span class="badge error">{format!("{e} error{}", if e == 1 { "" } else { "s" })}</span>
                        <span class="badge warning">{format!("{w} warning{}", if w == 1 { "" } else { "s" })}</span>
                    }.into_any(),
                }}
            </p>
            <ul class="problem-list">
                {move || {
                    let mut problems = report.get().problems;
                    problems.sort_by_key(|p| p.severity);
                    problems.into_iter().map(|p| {
                        let class = match p.severity { Severity::Error => "problem error", Severity::Warning => "problem warning" };
                        let place = match (p.line, p.column) {
                            (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
                            _ => String::new(),
                        };
                        view! {
                            <li class=class>
                                <code class="path">{if p.path.is_empty() { "(document)".to_string() } else { p.path.clone() }}</code>
                                <span class="message">{p.message.clone()}{place}</span>
                            </li>
                        }
                    }).collect_view()
                }}
            </ul>
        </div>
    }
}

/// A failed load, shown in place of the content.
#[component]
pub fn ErrorBox(message: String) -> impl IntoView {
    view! { <div class="error-box" role="alert">{message}</div> }
}

/// A placeholder while data loads.
#[component]
pub fn Loading() -> impl IntoView {
    view! { <p class="loading">"Loading…"</p> }
}
