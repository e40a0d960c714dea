//! How a config diff is shown: the structural changes grouped by section (flavors, queues,
//! rules) with their field paths and old → new values, then the canonical YAMLs side by
//! side with changed lines highlighted and long unchanged stretches folded.

use leptos::prelude::*;
use serde_json::Value;

use crate::config::diff::{line_diff, Change, ChangeKind, ConfigDiff, LineTag, Section};

/// Unchanged lines kept around each change in the side-by-side view.
const CONTEXT: usize = 3;
/// Longest value shown inline; longer ones are cut (the full value is in the tooltip).
const MAX_VALUE: usize = 140;

/// A diff as change groups and a side-by-side YAML view.
#[component]
pub fn DiffView(diff: ConfigDiff, old_yaml: String, new_yaml: String, old_label: String, new_label: String) -> impl IntoView {
    if diff.identical {
        return view! { <p class="hint" data-testid="no-changes">"No changes: the two configs are identical."</p> }.into_any();
    }
    view! {
        <StructuralChanges changes=diff.changes/>
        <h3 class="diff-title">"Canonical YAML"</h3>
        <SideBySide old_yaml new_yaml old_label new_label/>
    }
    .into_any()
}

/// The structural changes, one group per section.
#[component]
pub fn StructuralChanges(changes: Vec<Change>) -> impl IntoView {
    let groups = [(Section::Flavors, "Flavors"), (Section::Queues, "Queues"), (Section::Rules, "Rules"), (Section::Settings, "Settings")];
    view! {
        <div class="change-groups" data-testid="changes">
            {groups.into_iter().filter_map(|(section, title)| {
                let items: Vec<&Change> = changes.iter().filter(|c| c.section == section).collect();
                if items.is_empty() {
                    return None;
                }
                let count = items.len();
                let rows = items.into_iter().map(|c| {
                    let kind = kind_name(c.kind);
                    // Whole items (an added queue) are better read in the YAML below.
                    let whole_item = matches!(c.kind, ChangeKind::Added | ChangeKind::Removed)
                        && [c.old.as_ref(), c.new.as_ref()].into_iter().flatten().any(Value::is_object);
                    let values = match c.kind {
                        _ if whole_item => ().into_any(),
                        ChangeKind::Added => view! { <span class="val new">{short(c.new.as_ref())}</span> }.into_any(),
                        ChangeKind::Removed => view! { <span class="val old">{short(c.old.as_ref())}</span> }.into_any(),
                        _ => view! {
                            <span class="val old" title=full(c.old.as_ref())>{short(c.old.as_ref())}</span>
                            <span class="arrow" aria-label="becomes">" → "</span>
                            <span class="val new" title=full(c.new.as_ref())>{short(c.new.as_ref())}</span>
                        }.into_any(),
                    };
                    view! {
                        <li class="change" data-testid="change">
                            <span class=format!("kind {kind}")>{kind}</span>
                            <div class="change-body">
                                <p class="change-summary">{c.summary.clone()}</p>
                                <p class="change-detail"><code class="path">{c.path.clone()}</code>" " {values}</p>
                            </div>
                        </li>
                    }
                }).collect_view();
                Some(view! {
                    <section class="change-group" data-section=title.to_lowercase()>
                        <h3>{title} <span class="count">{count}</span></h3>
                        <ul class="changes">{rows}</ul>
                    </section>
                })
            }).collect_view()}
        </div>
    }
}

fn kind_name(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Removed => "removed",
        ChangeKind::Changed => "changed",
        ChangeKind::Reordered => "reordered",
    }
}

/// A value as JSON, except that whole numbers read as in the YAML (`64`, not `64.0`).
fn full(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "(none)".into(),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if n.is_f64() => x.to_string(),
            _ => n.to_string(),
        },
        Some(v) => v.to_string(),
    }
}

fn short(v: Option<&Value>) -> String {
    let s = full(v);
    match s.char_indices().nth(MAX_VALUE) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

/// One row of the side-by-side view.
#[derive(Debug, Clone, PartialEq)]
enum Row {
    /// Old and new side (either may be missing); `changed` when they differ.
    Pair { old: Option<(usize, String)>, new: Option<(usize, String)>, changed: bool },
    /// This many unchanged lines, folded.
    Fold(usize),
}

/// Pairs deleted and inserted lines of each edited stretch, then folds unchanged runs.
fn rows(old_text: &str, new_text: &str) -> Vec<Row> {
    let mut out = Vec::new();
    let (mut dels, mut ins) = (Vec::new(), Vec::new());
    let flush = |dels: &mut Vec<(usize, String)>, ins: &mut Vec<(usize, String)>, out: &mut Vec<Row>| {
        let n = dels.len().max(ins.len());
        let (mut d, mut i) = (dels.drain(..), ins.drain(..));
        for _ in 0..n {
            out.push(Row::Pair { old: d.next(), new: i.next(), changed: true });
        }
    };
    for line in line_diff(old_text, new_text) {
        match line.tag {
            LineTag::Equal => {
                flush(&mut dels, &mut ins, &mut out);
                out.push(Row::Pair {
                    old: line.old_line.map(|n| (n, line.text.clone())),
                    new: line.new_line.map(|n| (n, line.text)),
                    changed: false,
                });
            }
            LineTag::Delete => dels.push((line.old_line.unwrap_or_default(), line.text)),
            LineTag::Insert => ins.push((line.new_line.unwrap_or_default(), line.text)),
        }
    }
    flush(&mut dels, &mut ins, &mut out);
    fold(out)
}

/// Replaces unchanged lines further than [`CONTEXT`] from any change by [`Row::Fold`].
fn fold(rows: Vec<Row>) -> Vec<Row> {
    let changed: Vec<bool> = rows.iter().map(|r| matches!(r, Row::Pair { changed: true, .. })).collect();
    let near = |i: usize| {
        let lo = i.saturating_sub(CONTEXT);
        let hi = (i + CONTEXT + 1).min(changed.len());
        changed[lo..hi].iter().any(|c| *c)
    };
    let mut out = Vec::new();
    let mut hidden = 0;
    for (i, row) in rows.into_iter().enumerate() {
        if near(i) {
            if hidden > 0 {
                out.push(Row::Fold(hidden));
                hidden = 0;
            }
            out.push(row);
        } else {
            hidden += 1;
        }
    }
    if hidden > 0 {
        out.push(Row::Fold(hidden));
    }
    out
}

/// The two texts side by side.
#[component]
pub fn SideBySide(old_yaml: String, new_yaml: String, old_label: String, new_label: String) -> impl IntoView {
    let cell = |side: Option<(usize, String)>, class: &'static str, changed: bool| match side {
        Some((n, text)) => view! {
            <td class="ln">{n}</td>
            <td class=if changed { format!("code {class}") } else { "code".to_string() }>{text}</td>
        }.into_any(),
        None => view! { <td class="ln empty"></td><td class="code empty"></td> }.into_any(),
    };
    let body = rows(&old_yaml, &new_yaml).into_iter().map(|row| match row {
        Row::Pair { old, new, changed } => view! {
            <tr class:changed=changed>{cell(old, "del", changed)}{cell(new, "ins", changed)}</tr>
        }.into_any(),
        Row::Fold(n) => view! {
            <tr class="fold"><td colspan="4">{format!("⋯ {n} unchanged line{} ⋯", if n == 1 { "" } else { "s" })}</td></tr>
        }.into_any(),
    }).collect_view();
    view! {
        <p class="sbs-legend">
            <span class="val old">{format!("− {old_label}")}</span>" "<span class="val new">{format!("+ {new_label}")}</span>
        </p>
        <div class="sbs-wrap">
            <table class="sbs" data-testid="sbs-diff">
                <colgroup><col class="ln-col"/><col/><col class="ln-col"/><col/></colgroup>
                <thead><tr><th colspan="2" scope="col">{old_label}</th><th colspan="2" scope="col">{new_label}</th></tr></thead>
                <tbody>{body}</tbody>
            </table>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_read_as_in_yaml() {
        assert_eq!(full(Some(&serde_json::json!(64.0))), "64");
        assert_eq!(full(Some(&serde_json::json!(0.5))), "0.5");
        assert_eq!(full(Some(&serde_json::json!("spot"))), "\"spot\"");
        assert_eq!(full(None), "(none)");
    }

    #[test]
    fn edited_lines_pair_up_and_far_context_folds() {
        let old: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let r = rows(&old, &new);
        assert_eq!(r.first(), Some(&Row::Fold(6)));
        assert_eq!(r.last(), Some(&Row::Fold(7)));
        let changed: Vec<_> = r.iter().filter(|x| matches!(x, Row::Pair { changed: true, .. })).collect();
        assert_eq!(
            changed,
            [&Row::Pair { old: Some((10, "line 10".into())), new: Some((10, "line ten".into())), changed: true }]
        );
    }
}
