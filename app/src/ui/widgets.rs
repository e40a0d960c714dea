//! Small pieces shared by the pages: times in the viewer's zone, error boxes, loading.

use chrono::{DateTime, Utc};
use leptos::prelude::*;


/// A UTC instant shown in the viewer's local time once the page is hydrated (UTC before).
#[component]
pub fn LocalTime(at: DateTime<Utc>) -> impl IntoView {
    let text = RwSignal::new(at.format("%Y-%m-%d %H:%M:%S UTC").to_string());
    // Effects run only in the browser, where chrono knows the viewer's time zone.
    Effect::new(move |_| text.set(at.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S").to_string()));
    view! { <time datetime=at.to_rfc3339() title=at.to_rfc3339()>{move || text.get()}</time> }
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

/// A job state as a coloured badge.
#[component]
pub fn StateBadge(state: crate::jobs::JobState) -> impl IntoView {
    use crate::jobs::JobState::*;
    let tone = match state {
        Pending | Admitted => "wait",
        Running => "run",
        Succeeded => "ok",
        Failed | TimedOut | Rejected => "error",
        Cancelled => "muted",
    };
    view! { <span class=format!("badge state {tone}") data-state=state.as_str()>{state.as_str().replace('_', " ")}</span> }
}

/// `42 s`, `3 m 20 s`, `2 h 5 m`, `3 d 4 h`.
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} m {} s", s / 60, s % 60),
        3600..86400 => format!("{} h {} m", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}

/// A resource amount without needless decimals: `2`, `0.5`, `1.25`.
pub fn amount(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    if r.fract() == 0.0 { format!("{r:.0}") } else { format!("{r}") }
}

/// Seconds from `from` to `to`.
pub fn secs_between(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_milliseconds() as f64 / 1000.0
}

/// Jobs of a queue waiting this long (seconds) are trouble: its bars turn red.
pub const WAIT_TROUBLE_S: f64 = 600.0;

/// Whether a queue whose longest wait is `longest_wait_s` is in trouble (see [`WAIT_TROUBLE_S`]).
pub fn waits_too_long(longest_wait_s: Option<f64>) -> bool {
    longest_wait_s.is_some_and(|w| w >= WAIT_TROUBLE_S)
}

/// The tone of a bar filled to `pct`: a full quota is busy, not an error; red is kept for
/// `trouble` (jobs waiting too long).
pub fn usage_tone(pct: f64, trouble: bool) -> &'static str {
    match (trouble, pct) {
        (true, _) => "trouble",
        (false, p) if p >= 100.0 => "full",
        (false, p) if p >= 80.0 => "high",
        _ => "",
    }
}

/// Use of one resource against its quota: a bar, or "unlimited" / "blocked" said as such.
#[component]
pub fn UsageBar(label: String, used: f64, nominal: Option<f64>, #[prop(optional)] trouble: bool) -> impl IntoView {
    let (fill, text, tone) = match nominal {
        None => (0.0, format!("{} in use · unlimited", amount(used)), "unlimited"),
        Some(n) if n <= 0.0 => (0.0, "blocked (quota 0)".to_string(), "blocked"),
        Some(n) => {
            let pct = (used / n * 100.0).clamp(0.0, 100.0);
            (pct, format!("{} / {}", amount(used), amount(n)), usage_tone(pct, trouble))
        }
    };
    view! {
        <div class=format!("usage {tone}") data-testid="usage">
            <div class="usage-head"><span class="usage-label">{label.clone()}</span><span class="usage-text">{text.clone()}</span></div>
            <div class="bar" role="meter" aria-label=format!("{label}: {text}") aria-valuemin="0" aria-valuemax="100" aria-valuenow=format!("{fill:.0}")>
                <div class="fill" style=format!("width: {fill:.1}%")></div>
            </div>
        </div>
    }
}

/// A quota cell's use: in a cohort, the part within nominal, the part of its idle quota lent
/// to peers and the part borrowed above nominal are segments of their own, and said in words
/// (`3 / 2 · 1 borrowed from research`). Outside a cohort, a [`UsageBar`].
#[component]
pub fn QuotaBar(label: String, u: crate::jobs::QuotaUsage, cohort: Option<String>, #[prop(optional)] trouble: bool) -> impl IntoView {
    let (Some(cohort), Some(nominal)) = (cohort, u.nominal.filter(|n| *n > 0.0)) else {
        return view! { <UsageBar label used=u.used nominal=u.nominal trouble/> }.into_any();
    };
    let own = u.within_nominal().max(0.0);
    let scale = nominal.max(u.used).max(own + u.lent);
    let pct = |x: f64| (x / scale * 100.0).clamp(0.0, 100.0);
    let mut words = format!("{} / {}", amount(u.used), amount(nominal));
    if u.borrowed > 0.0 {
        words.push_str(&format!(" · {} borrowed from {cohort}", amount(u.borrowed)));
    }
    if u.lent > 0.0 {
        words.push_str(&format!(" · {} lent to {cohort}", amount(u.lent)));
    }
    let tone = if trouble { "trouble" } else if u.borrowed > 0.0 { "borrowing" } else if own >= nominal { "full" } else { "" };
    view! {
        <div class=format!("usage {tone}") data-testid="usage" data-borrowed=u.borrowed data-lent=u.lent>
            <div class="usage-head"><span class="usage-label">{label.clone()}</span><span class="usage-text">{words.clone()}</span></div>
            <div class="bar segments" role="meter" aria-label=format!("{label}: {words}") aria-valuemin="0" aria-valuemax="100"
                aria-valuenow=format!("{:.0}", pct(u.used))>
                <span class="seg own" style=format!("width: {:.1}%", pct(own))></span>
                <span class="seg lent" title=format!("lent to {cohort}") style=format!("width: {:.1}%", pct(u.lent))></span>
                <span class="seg borrowed" title=format!("borrowed from {cohort}") style=format!("width: {:.1}%", pct(u.borrowed))></span>
                {(u.used > nominal).then(|| view! { <span class="nominal-mark" style=format!("left: {:.1}%", pct(nominal))></span> })}
            </div>
        </div>
    }
    .into_any()
}

/// Cursor paging under a list: what the page shows, "← Newest" unless this is the first
/// page (`newest`: its link), "Older →" when there is more (`older`).
#[component]
pub fn Pager(note: &'static str, newest: Option<String>, older: Option<String>) -> impl IntoView {
    view! {
        <nav class="pager" aria-label="Pages">
            <span class="hint">{note}</span>
            <span class="pager-links">
                {newest.map(|href| view! { <a class="button" href=href>"← Newest"</a> })}
                {older.map(|href| view! { <a class="button" data-testid="older" href=href>"Older →"</a> })}
            </span>
        </nav>
    }
}

#[cfg(test)]
mod tests {
    use super::{usage_tone, waits_too_long, WAIT_TROUBLE_S};

    #[test]
    fn a_full_quota_is_busy_and_only_long_waits_are_trouble() {
        assert_eq!(usage_tone(100.0, false), "full");
        assert_eq!(usage_tone(85.0, false), "high");
        assert_eq!(usage_tone(20.0, false), "");
        assert_eq!(usage_tone(20.0, true), "trouble");
        assert!(!waits_too_long(None));
        assert!(!waits_too_long(Some(WAIT_TROUBLE_S - 1.0)));
        assert!(waits_too_long(Some(WAIT_TROUBLE_S)));
    }
}
