//! The Ray backend's pure parts: job status mapping, selectors, submission bodies.

use super::*;
use crate::engine::FlavorAssignment;

fn spec() -> StartSpec {
    StartSpec {
        run: RunId { job: "j-1".into(), run: 2 },
        entrypoint: "echo hi".into(),
        working_dir: None,
        env_vars: BTreeMap::from([("A".into(), "b".into())]),
        runtime_env: Map::new(),
        resources: Resources::new([("cpu", Milli::units(1)), ("gpu", Milli::units(2)), ("memory_gb", Milli(500)), ("accel", Milli::units(1))]),
        timeout_s: 0,
        node: "ray:abc".into(),
        flavors: vec![FlavorAssignment { flavor: "f".into(), resources: vec!["cpu".into()] }],
        selector_labels: BTreeMap::from([("pool".into(), "test".into()), ("backend".into(), "ray".into())]),
        metadata: BTreeMap::from([("queue".into(), "q".into())]),
        packages: Vec::new(),
    }
}

#[test]
fn a_submission_carries_resources_selector_and_metadata_and_nothing_else() {
    let body = submission(&spec(), &["pool".to_string()]);
    assert_eq!(
        body,
        json!({
            "entrypoint": "echo hi",
            "submission_id": "j-1-r2",
            "runtime_env": {"env_vars": {"A": "b", "BERTH_JOB_ID": "j-1", "BERTH_RUN": "2"}},
            "metadata": {"queue": "q"},
            "entrypoint_num_cpus": 1.0,
            "entrypoint_num_gpus": 2.0,
            "entrypoint_memory": 536870912u64,
            "entrypoint_resources": {"accel": 1.0},
            // `backend` is Berth's label, no Ray node has it.
            "entrypoint_label_selector": {"pool": "test"},
        })
    );
}

#[test]
fn statuses_map_to_outcomes() {
    assert_eq!(outcome_of(&json!({"status": "RUNNING"})), None);
    assert_eq!(outcome_of(&json!({"status": "PENDING"})), None);
    assert_eq!(outcome_of(&json!({"status": "SUCCEEDED"})), Some(Outcome::Exited(0)));
    assert_eq!(
        outcome_of(&json!({"status": "FAILED", "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR", "message": "exit 3"})),
        Some(Outcome::Failed("JOB_ENTRYPOINT_COMMAND_ERROR: exit 3".into()))
    );
    assert!(matches!(outcome_of(&json!({"status": "STOPPED"})), Some(Outcome::Failed(_))));
}

#[test]
fn nodes_come_from_the_state_api_with_berth_names() {
    let body = json!({"result": true, "data": {"result": {"result": [
        {"node_id": "7f5033466a00ef22e3603ec5", "state": "ALIVE",
         "resources_total": {"CPU": 4.0, "GPU": 2.0, "memory": 16418352743.0, "object_store_memory": 7.0e9,
                             "node:127.0.0.1": 1.0, "node:__internal_head__": 1.0, "accel": 2.0},
         "labels": {"ray.io/node-id": "7f50", "pool": "test"}},
        {"node_id": "dead", "state": "DEAD", "resources_total": {"CPU": 1.0}, "labels": {}}
    ]}}});
    let nodes = parse_nodes("ray", &body);
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].ray_id, "7f5033466a00ef22e3603ec5");
    assert!(nodes[0].keys.iter().any(|(camel, name, _)| camel == "CPU" && &**name == "cpu"));
    let n = &nodes[0].node;
    assert_eq!(&*n.id, "ray:7f5033466a00");
    assert_eq!(&*n.backend, "ray");
    assert_eq!(n.labels.get("pool").map(String::as_str), Some("test"));
    assert_eq!(n.labels.get("backend").map(String::as_str), Some("ray"));
    assert_eq!(n.capacity, Resources::new([("cpu", Milli::units(4)), ("gpu", Milli::units(2)), ("accel", Milli::units(2)), ("memory_gb", Milli(15290))]));
}

#[test]
fn ray_errors_are_shortened_to_their_last_line() {
    assert_eq!(last_line("Traceback…\n  File x\nValueError: Job with submission_id a already exists.\n\n"), "ValueError: Job with submission_id a already exists.");
}

/// Recovery while Ray does not answer: a run whose start was acknowledged is watched
/// until Ray can say how it is; one whose start never was goes back to its queue (and is
/// not failed later as lost when Ray, back with no record of it, says it never had it).
#[tokio::test]
async fn recovery_without_ray_requeues_unacknowledged_starts_and_watches_the_rest() {
    let (exits, _rx) = tokio::sync::mpsc::unbounded_channel();
    let mut cfg = RayConfig::new("ray", "http://127.0.0.1:9"); // discard: nothing listens
    cfg.request_timeout = Duration::from_secs(2);
    let ray = RayBackend::new(cfg, exits).unwrap();
    assert_eq!(ray.adopt(spec(), None).await, Adopted::NeverStarted);
    assert_eq!(ray.adopt(spec(), Some("j-1-r2".into())).await, Adopted::Running { handle: "j-1-r2".into() });
    assert!(ray.lock_watched().contains_key("j-1-r2"));
}

/// An autoscaled worker that left: a job only it could take waits for one to come back
/// (known nodes keep its shape); one shape is kept however many such workers came and went.
#[test]
fn nodes_that_left_are_remembered_by_shape() {
    let worker = |id: &str, gpus: f64| {
        json!({"node_id": id, "state": "ALIVE", "resources_total": {"CPU": 8.0, "GPU": gpus}, "labels": {"ray.io/node-id": id, "pool": "gpu"}})
    };
    let head = json!({"node_id": "head0000000000", "state": "ALIVE", "resources_total": {"CPU": 2.0}, "labels": {"ray.io/node-id": "head"}});
    let list = |nodes: Vec<Value>| parse_nodes("ray", &json!({"data": {"result": {"result": nodes}}}));
    let mut gone = Vec::new();
    let (with_one, only_head) = (list(vec![head.clone(), worker("w1aaaaaaaaaaaa", 2.0)]), list(vec![head.clone()]));
    remember_gone(&mut gone, &with_one, &only_head);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].capacity.get("gpu"), Milli::units(2));
    // Another worker of the same shape came and went: still one.
    remember_gone(&mut gone, &only_head, &list(vec![head.clone(), worker("w2bbbbbbbbbbbb", 2.0)]));
    assert!(gone.is_empty(), "a live node of that shape is listed again");
    remember_gone(&mut gone, &list(vec![head.clone(), worker("w2bbbbbbbbbbbb", 2.0)]), &only_head);
    assert_eq!(gone.len(), 1);
    // A different shape is kept beside it.
    remember_gone(&mut gone, &list(vec![head.clone(), worker("w3cccccccccccc", 4.0)]), &only_head);
    assert_eq!(gone.len(), 2);
}

/// With a callback URL the run reports its own exit: the command runs in a subshell (an
/// `exit` or a trailing comment in it cannot skip the report) and its status is returned.
#[test]
fn a_reporting_submission_wraps_the_command_and_passes_its_status_on() {
    let mut body = submission(&spec(), &[]);
    exits::reporting(&mut body, "j-1-r2", "http://berth:3000/", "tok");
    assert_eq!(body["entrypoint"], "(\necho hi\n)\nset -- $?; eval \"$BERTH_ON_EXIT\"; exit $1");
    let env = &body["runtime_env"]["env_vars"];
    assert_eq!(env["BERTH_EXIT_URL"], "http://berth:3000/api/v1/runs/j-1-r2/exit");
    assert_eq!(env["BERTH_EXIT_TOKEN"], "tok");
    assert_eq!(env["A"], "b", "the job's own variables stay");
    // The wrapper, run by a real shell against no server: the command's status survives
    // a failed report, and `exit` inside the command ends only the subshell.
    let run = |command: &str| {
        let mut body = submission(&StartSpec { entrypoint: command.into(), ..spec() }, &[]);
        exits::reporting(&mut body, "j-1-r2", "http://127.0.0.1:9", "tok");
        let env = body["runtime_env"]["env_vars"].as_object().unwrap().clone();
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(body["entrypoint"].as_str().unwrap())
            .envs(env.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())))
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    assert_eq!(run("echo out; exit 3 # a comment"), (Some(3), "out\n".to_string()));
    assert_eq!(run("true"), (Some(0), String::new()));
}

#[test]
fn a_reported_status_of_128_plus_n_is_signal_n() {
    assert_eq!(exits::outcome_of_status(0), Outcome::Exited(0));
    assert_eq!(exits::outcome_of_status(3), Outcome::Exited(3));
    assert_eq!(exits::outcome_of_status(137), Outcome::Signaled(9));
}

/// A report is taken once, with the run's own token, and only for a run this server
/// watches; a run Berth is stopping reports nothing to the loop.
#[tokio::test]
async fn a_report_needs_the_runs_token() {
    let (tx, mut exits) = tokio::sync::mpsc::unbounded_channel();
    let ray = RayBackend::new(RayConfig::new("ray", "http://127.0.0.1:9"), tx).unwrap();
    let mut w = Watch::new(spec().run, false, Instant::now() + UNPOLLED);
    w.token = Some("right".into());
    ray.lock_watched().insert("j-1-r2".into(), w);
    assert_eq!(ray.report_exit("j-1-r2", "wrong", 0), ExitReport::Refused);
    assert_eq!(ray.report_exit("j-9-r1", "right", 0), ExitReport::Unknown);
    assert!(exits.try_recv().is_err(), "nothing reached the loop");
    assert_eq!(ray.report_exit("j-1-r2", "right", 4), ExitReport::Taken);
    let exit = exits.try_recv().unwrap();
    assert_eq!((exit.run, exit.outcome), (spec().run, Outcome::Exited(4)));
    assert_eq!(ray.report_exit("j-1-r2", "right", 4), ExitReport::Taken);
    assert!(exits.try_recv().is_err(), "a second report is not a second end");
    // Ray's own record of the end then only releases the run.
    ray.settle("j-1-r2", Some(&json!({"status": "SUCCEEDED"}))).await;
    assert!(exits.try_recv().is_err());
    assert!(!ray.lock_watched().contains_key("j-1-r2"));

    let mut stopping = Watch::new(spec().run, true, Instant::now());
    stopping.token = Some("right".into());
    ray.lock_watched().insert("j-1-r2".into(), stopping);
    assert_eq!(ray.report_exit("j-1-r2", "right", 143), ExitReport::Taken);
    assert!(exits.try_recv().is_err(), "a stopped run's end is the loop's own");
}
