//! `/jobs/new`: submit a job. Each field is checked as it is typed, with the problem shown at
//! the field; the server's answer (submitted, rejected with the reason, invalid) is shown in
//! place, and a submitted job opens its page. Above the button the form says where the job
//! would go under the active config ("→ queue vision via rule 1, priority 10, flavor
//! team-cpu"), routed in the browser by the same code the server routes with.

use std::collections::BTreeMap;

use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

use super::server_fns::{get_config, submit_job, SubmitOutcome};
use crate::config::{route::flavors_for, Labels, Routing, SchedulerConfig};
use crate::jobs::{JobRequest, ResourceRequest, RuntimeEnv};

/// The form's text, field by field.
#[derive(Debug, Clone, Default)]
struct Draft {
    name: String,
    entrypoint: String,
    cpu: String,
    gpu: String,
    memory_gb: String,
    custom: String,
    labels: String,
    priority: String,
    timeout_s: String,
    retries: String,
    workdir: String,
    env: String,
}

/// `field → problem` for every bad field, and the request when there are none.
fn check(d: &Draft) -> (BTreeMap<&'static str, String>, Option<JobRequest>) {
    let mut errs = BTreeMap::new();
    let number = |errs: &mut BTreeMap<&'static str, String>, field: &'static str, raw: &str| -> Option<f64> {
        let raw = raw.trim();
        if raw.is_empty() {
            return None;
        }
        match raw.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Some(v),
            _ => {
                errs.insert(field, format!("`{raw}` is not a number ≥ 0"));
                None
            }
        }
    };
    let whole = |errs: &mut BTreeMap<&'static str, String>, field: &'static str, raw: &str, signed: bool| -> Option<i64> {
        let raw = raw.trim();
        if raw.is_empty() {
            return None;
        }
        match raw.parse::<i64>() {
            Ok(v) if signed || v >= 0 => Some(v),
            _ => {
                errs.insert(field, format!("`{raw}` is not a whole number{}", if signed { "" } else { " ≥ 0" }));
                None
            }
        }
    };
    let pairs = |errs: &mut BTreeMap<&'static str, String>, field: &'static str, raw: &str| -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for item in raw.split([',', '\n']).map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    out.insert(k.trim().to_string(), v.trim().to_string());
                }
                _ => {
                    errs.insert(field, format!("`{item}` is not KEY=VALUE"));
                }
            }
        }
        out
    };
    if d.entrypoint.trim().is_empty() {
        errs.insert("entrypoint", "a command is required".into());
    }
    let cpu = number(&mut errs, "cpu", &d.cpu);
    let gpu = number(&mut errs, "gpu", &d.gpu);
    let memory_gb = number(&mut errs, "memory_gb", &d.memory_gb);
    let mut custom = BTreeMap::new();
    for (k, v) in pairs(&mut errs, "custom", &d.custom) {
        match v.parse::<f64>() {
            Ok(n) if n.is_finite() && n >= 0.0 => {
                custom.insert(k, n);
            }
            _ => {
                errs.insert("custom", format!("{k}: `{v}` is not a number ≥ 0"));
            }
        }
    }
    if cpu.unwrap_or(0.0) + gpu.unwrap_or(0.0) + memory_gb.unwrap_or(0.0) + custom.values().sum::<f64>() <= 0.0 && !errs.contains_key("cpu") {
        errs.insert("cpu", "ask for at least one resource (cpu, gpu, memory or a custom one)".into());
    }
    let labels = pairs(&mut errs, "labels", &d.labels);
    let env_vars = pairs(&mut errs, "env", &d.env);
    let priority = whole(&mut errs, "priority", &d.priority, true);
    let timeout_s = whole(&mut errs, "timeout_s", &d.timeout_s, false).unwrap_or(0) as u64;
    let max_retries = whole(&mut errs, "retries", &d.retries, false).unwrap_or(0);
    if max_retries > u32::MAX as i64 {
        errs.insert("retries", "too many retries".into());
    }
    if !errs.is_empty() {
        return (errs, None);
    }
    let request = JobRequest {
        name: Some(d.name.trim().to_string()).filter(|n| !n.is_empty()),
        entrypoint: d.entrypoint.trim().to_string(),
        runtime_env: RuntimeEnv { working_dir: Some(d.workdir.trim().to_string()).filter(|w| !w.is_empty()), env_vars, ..Default::default() },
        labels,
        priority,
        resources: ResourceRequest { cpu, gpu, memory_gb, custom },
        timeout_s,
        max_retries: max_retries as u32,
        ..Default::default()
    };
    // Then the checks the server runs on every request, at the field they concern.
    for p in crate::request::problems(&request) {
        errs.entry(form_field(&p.field)).or_insert(p.message);
    }
    if !errs.is_empty() {
        return (errs, None);
    }
    (errs, Some(request))
}

/// Where the form's job would go under `cfg`: `→ queue vision via rule 1, priority 10,
/// flavor team-cpu`, or why it would be rejected. Bad fields are left out (they show their
/// own problem): labels that are not KEY=VALUE, a priority that is not a number.
fn destination(cfg: &SchedulerConfig, d: &Draft) -> Result<String, String> {
    let labels: Labels = d
        .labels
        .split([',', '\n'])
        .filter_map(|item| item.split_once('='))
        .filter(|(k, _)| !k.trim().is_empty())
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let priority = d.priority.trim().parse::<i64>().ok();
    let routing = Routing::new(cfg);
    let route = routing.route(&labels, priority).map_err(|r| format!("Would be rejected: {}", r.reason))?;
    let via = match route.rule_index {
        Some(i) => format!(" via rule {}", i + 1),
        None => " (no rules: every job goes there)".to_string(),
    };
    let head = format!("→ queue {}{via}, priority {}", route.queue, route.priority);
    let asked = asked_resources(d);
    match flavors_for(cfg, route.queue, &asked) {
        Ok(flavors) if flavors.is_empty() => Ok(head),
        Ok(flavors) => {
            let word = if flavors.len() == 1 { "flavor" } else { "flavors" };
            Ok(format!("{head}, {word} {}", flavors.join(", then ")))
        }
        Err(resource) => Err(format!("{head}: would be rejected, queue {} covers no {resource}", route.queue)),
    }
}

/// The resources the form asks for (amount above 0), by name.
fn asked_resources(d: &Draft) -> Vec<&str> {
    let positive = |raw: &str| raw.trim().parse::<f64>().is_ok_and(|v| v > 0.0);
    let mut out: Vec<&str> = [("cpu", &d.cpu), ("gpu", &d.gpu), ("memory_gb", &d.memory_gb)]
        .into_iter()
        .filter(|(_, raw)| positive(raw))
        .map(|(name, _)| name)
        .collect();
    for (k, v) in d.custom.split([',', '\n']).filter_map(|item| item.split_once('=')) {
        if !k.trim().is_empty() && positive(v) {
            out.push(k.trim());
        }
    }
    out
}

/// The form field a request path is typed in (`resources.cpu` → `cpu`).
fn form_field(path: &str) -> &'static str {
    let head = |p: &str| path == p || path.starts_with(&format!("{p}.")) || path.starts_with(&format!("{p}["));
    match path {
        "name" => "name",
        "resources.cpu" => "cpu",
        "resources.gpu" => "gpu",
        "resources.memory_gb" => "memory_gb",
        "runtime_env.working_dir" => "workdir",
        "timeout_s" => "timeout_s",
        "max_retries" => "retries",
        "priority" => "priority",
        _ if head("resources.custom") => "custom",
        _ if head("labels") => "labels",
        _ if head("runtime_env.env_vars") => "env",
        // `entrypoint`, and fields the form does not have (the server's answer names them).
        _ => "entrypoint",
    }
}

#[component]
pub fn SubmitPage() -> impl IntoView {
    let draft = RwSignal::new(Draft { cpu: "1".into(), ..Default::default() });
    let touched = RwSignal::new(false);
    let checked = Memo::new(move |_| check(&draft.get()).0);
    let outcome = RwSignal::new(None::<Result<SubmitOutcome, String>>);
    let submit = Action::new(move |req: &JobRequest| {
        let body = serde_json::to_string(req).unwrap_or_default();
        async move { submit_job(body).await }
    });
    // The active config, to show where the job would go; the server routes it again on submit.
    let active = Resource::new(|| (), |_| get_config(None));
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(result) = submit.value().get() {
            match result {
                Ok(SubmitOutcome::Submitted(job)) => navigate(&format!("/jobs/{}", job.id), Default::default()),
                Ok(other) => outcome.set(Some(Ok(other))),
                Err(e) => outcome.set(Some(Err(e.to_string()))),
            }
        }
    });
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        touched.set(true);
        if let (_, Some(req)) = check(&draft.get()) {
            outcome.set(None);
            submit.dispatch(req);
        }
    };
    let problem = move |field: &'static str| move || if touched.get() || !draft.with(|d| field_text(d, field).is_empty()) { checked.with(|c| c.get(field).cloned()) } else { None };

    macro_rules! field {
        ($id:literal, $label:literal, $key:ident, $err:literal, $hint:expr, $kind:literal, $placeholder:literal) => {{
            let err = problem($err);
            view! {
                <div class="field">
                    <label for=$id>$label</label>
                    <input id=$id type=$kind placeholder=$placeholder prop:value=move || draft.with(|d| d.$key.clone())
                        aria-invalid=move || err().is_some().to_string() aria-describedby=concat!($id, "-problem")
                        on:input=move |ev| draft.update(|d| d.$key = event_target_value(&ev))/>
                    <span class="field-hint">{$hint}</span>
                    <span class="field-problems" id=concat!($id, "-problem") data-testid=concat!("problem-", $err)>{move || problem($err)().map(|p| view! { <span class="problem error">{p}</span> })}</span>
                </div>
            }
        }};
    }

    view! {
        <header class="page-head">
            <h1><span class="crumb"><a href="/jobs">"Jobs"</a>" / "</span>"Submit a job"</h1>
        </header>
        <form class="card submit-form" on:submit=on_submit novalidate=true data-testid="submit-form">
            <div class="field wide">
                <label for="s-entrypoint">"Command"</label>
                <textarea id="s-entrypoint" rows="2" class="code-input" placeholder="python train.py --epochs 3"
                    prop:value=move || draft.with(|d| d.entrypoint.clone())
                    aria-invalid=move || problem("entrypoint")().is_some().to_string()
                    on:input=move |ev| draft.update(|d| d.entrypoint = event_target_value(&ev))></textarea>
                <span class="field-hint">"Run by sh in its own process group on the backend the queue's flavor selects."</span>
                <span class="field-problems" data-testid="problem-entrypoint">{move || problem("entrypoint")().map(|p| view! { <span class="problem error">{p}</span> })}</span>
            </div>
            <div class="field-grid four">
                {field!("s-name", "Name", name, "name", "optional", "text", "nightly-eval")}
                {field!("s-priority", "Priority", priority, "priority", "empty: the rule's default", "text", "")}
                {field!("s-timeout", "Timeout (s)", timeout_s, "timeout_s", "0 or empty: none", "text", "0")}
                {field!("s-retries", "Retries", retries, "retries", "on failure", "text", "0")}
            </div>
            <fieldset>
                <legend>"Resources"</legend>
                <div class="field-grid four">
                    {field!("s-cpu", "CPU", cpu, "cpu", "", "text", "1")}
                    {field!("s-gpu", "GPU", gpu, "gpu", "", "text", "0")}
                    {field!("s-mem", "Memory (GB)", memory_gb, "memory_gb", "", "text", "")}
                    {field!("s-custom", "Custom", custom, "custom", "NAME=AMOUNT, …", "text", "accel=1")}
                </div>
            </fieldset>
            <div class="field-grid">
                {field!("s-labels", "Labels", labels, "labels", "KEY=VALUE, … (rules route on these)", "text", "team=vision")}
                {field!("s-env", "Environment", env, "env", "KEY=VALUE, …", "text", "")}
                {field!("s-workdir", "Working dir", workdir, "workdir", "empty: a fresh directory per run", "text", "")}
            </div>
            {move || outcome.get().map(|o| match o {
                Ok(SubmitOutcome::Rejected(job)) => view! {
                    <div class="banner conflict" role="alert" data-testid="rejected">
                        <p><strong>"Rejected: "</strong>{job.reason.clone().unwrap_or_default()}</p>
                        <p><a href=format!("/jobs/{}", job.id)>"The rejection is recorded as job "{job.id.clone()}</a></p>
                    </div>
                }.into_any(),
                Ok(SubmitOutcome::Invalid(m)) => view! { <div class="error-box" role="alert" data-testid="invalid">{m}</div> }.into_any(),
                Ok(SubmitOutcome::Submitted(_)) => ().into_any(),
                Err(e) => view! { <div class="error-box" role="alert">{e}</div> }.into_any(),
            })}
            <Transition fallback=|| ()>
                {move || active.get().and_then(Result::ok).map(|cfg| {
                    let said = Memo::new(move |_| draft.with(|d| destination(&cfg.config, d)));
                    view! {
                        <p class="route-preview" data-testid="route-preview" aria-live="polite"
                            class:rejected=move || said.with(Result::is_err)>
                            {move || said.get().unwrap_or_else(|e| e)}
                        </p>
                    }
                })}
            </Transition>
            <div class="form-foot">
                <span class="hint">{move || match checked.with(|c| c.len()) { 0 => "Ready to submit.".to_string(), 1 => "1 field needs attention.".into(), n => format!("{n} fields need attention.") }}</span>
                <button type="submit" class="button primary" data-testid="submit" disabled=move || submit.pending().get()>"Submit"</button>
            </div>
        </form>
    }
}

fn field_text<'a>(d: &'a Draft, field: &str) -> &'a str {
    match field {
        "name" => &d.name,
        "entrypoint" => &d.entrypoint,
        "cpu" => &d.cpu,
        "gpu" => &d.gpu,
        "memory_gb" => &d.memory_gb,
        "custom" => &d.custom,
        "labels" => &d.labels,
        "priority" => &d.priority,
        "timeout_s" => &d.timeout_s,
        "retries" => &d.retries,
        "workdir" => &d.workdir,
        "env" => &d.env,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_field_is_named_and_nothing_is_built() {
        let d = Draft { entrypoint: "true".into(), cpu: "-1".into(), labels: "team".into(), ..Default::default() };
        let (errs, req) = check(&d);
        assert!(req.is_none());
        assert!(errs["cpu"].contains("-1"), "{errs:?}");
        assert!(errs["labels"].contains("KEY=VALUE"), "{errs:?}");
    }

    #[test]
    fn a_good_form_builds_the_request() {
        let d = Draft { entrypoint: " sleep 1 ".into(), cpu: "0.5".into(), custom: "accel=1".into(), labels: "team=a, env=b".into(), priority: "-3".into(), ..Default::default() };
        let (errs, req) = check(&d);
        assert!(errs.is_empty(), "{errs:?}");
        let req = req.unwrap();
        assert_eq!(req.entrypoint, "sleep 1");
        assert_eq!(req.resources.cpu, Some(0.5));
        assert_eq!(req.resources.custom["accel"], 1.0);
        assert_eq!(req.labels.len(), 2);
        assert_eq!(req.priority, Some(-3));
    }

    #[test]
    fn the_servers_checks_show_at_their_fields() {
        let d = Draft {
            entrypoint: "true".into(),
            cpu: "1".into(),
            workdir: "relative/dir".into(),
            retries: "1000".into(),
            env: "A=1".into(),
            ..Default::default()
        };
        let (errs, req) = check(&d);
        assert!(req.is_none());
        assert!(errs["workdir"].contains("absolute path"), "{errs:?}");
        assert!(errs["retries"].starts_with("at most 100"), "{errs:?}");
        assert!(!errs.contains_key("env"), "{errs:?}");
    }

    #[test]
    fn the_form_says_where_the_job_goes_as_the_server_would_route_it() {
        let cfg = crate::config::parse_auto(
            "resource_flavors:\n- name: team-cpu\nresource_queues:\n- name: vision\n  resource_groups:\n  - covered_resources: [cpu]\n    flavors:\n    - name: team-cpu\n\
             scheduling_rules:\n- resource_queue: vision\n  selector:\n  - key: team\n    operator: in\n    values: [vision]\n  priority_policy:\n    default: 10\n    max: 20\n",
        )
        .expect("parses");
        let form = |labels: &str, priority: &str, gpu: &str| Draft { cpu: "1".into(), gpu: gpu.into(), labels: labels.into(), priority: priority.into(), ..Default::default() };
        assert_eq!(destination(&cfg, &form("team=vision", "", "")), Ok("→ queue vision via rule 1, priority 10, flavor team-cpu".into()));
        assert_eq!(
            destination(&cfg, &form("team=vision", "30", "")),
            Err("Would be rejected: priority 30 is above the maximum 20 allowed by scheduling_rules[0] (queue vision)".into())
        );
        assert_eq!(destination(&cfg, &form("team=x", "", "")), Err("Would be rejected: no scheduling rule matches labels team=x".into()));
        assert_eq!(
            destination(&cfg, &form("team=vision", "", "1")),
            Err("→ queue vision via rule 1, priority 10: would be rejected, queue vision covers no gpu".into())
        );
    }

    #[test]
    fn a_job_must_ask_for_something() {
        let d = Draft { entrypoint: "true".into(), ..Default::default() };
        assert!(check(&d).0["cpu"].contains("at least one resource"));
    }
}
