//! A loop you can drive by hand (in the manner of Nomad's scheduler harness): a fake backend
//! that records starts and stops, the real job store on a fresh SQLite database, a manual
//! clock, and one public cycle at a time. The tests below are the loop's behaviours that
//! once needed the real binary: admission order within quota, timeouts, retries with
//! backoff, preemption, rerouting on apply, and the decisions of recovery after a restart.

use std::sync::Mutex;
use std::time::Duration;

use app::config::parse::parse_auto;
use app::jobs::JobRequest;

use super::*;
use crate::backends::{Adopted, BoxFuture, Stream, Traits};
use crate::clock::ManualClock;
use crate::services::auth::Caller;
use crate::services::config::ConfigService;
use crate::store::config::{ApplyMeta, ConfigStore};
use crate::store::Db;

mod cohort;

/// One node with `cpus` CPUs (4 unless said); starts succeed at once and are recorded, as
/// are stops. After a restart it reports each run as `adopt_as` says (by run key), else as
/// never started.
#[derive(Debug, Default)]
struct FakeBackend {
    cpus: f64,
    started: Mutex<Vec<RunId>>,
    stopped: Mutex<Vec<RunId>>,
    adopt_as: Mutex<HashMap<String, Adopted>>,
}

impl Backend for FakeBackend {
    fn name(&self) -> &str {
        "fake"
    }
    fn nodes(&self) -> Vec<Node> {
        let cpu = Resources::new([("cpu", Milli::from_f64(self.cpus).expect("a number"))]);
        vec![Node { id: "n1".into(), backend: "fake".into(), labels: Default::default(), capacity: cpu, used_outside: Resources::default() }]
    }
    fn start(&self, spec: StartSpec) -> BoxFuture<'_, Result<String, BackendError>> {
        self.started.lock().unwrap().push(spec.run.clone());
        Box::pin(async move { Ok(format!("h-{}", spec.run.key())) })
    }
    fn stop(&self, run: RunId, _handle: String) -> BoxFuture<'_, Result<(), BackendError>> {
        self.stopped.lock().unwrap().push(run);
        Box::pin(async { Ok(()) })
    }
    fn adopt(&self, spec: StartSpec, _handle: Option<String>) -> BoxFuture<'_, Adopted> {
        let adopted = self.adopt_as.lock().unwrap().remove(&spec.run.key()).unwrap_or(Adopted::NeverStarted);
        Box::pin(async move { adopted })
    }
    fn logs(&self, _run: RunId, _stream: Stream, _tail: Option<u64>) -> BoxFuture<'_, Result<Vec<u8>, BackendError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    fn traits(&self) -> Traits {
        Traits { starts_at_once: true, ..Traits::default() }
    }
}

/// A loop over `store` with `backend` (or none), reading the config `service` publishes and
/// the manual clock; with the senders of its command and exit channels.
fn new_loop(
    store: JobStore,
    backend: Option<Arc<FakeBackend>>,
    settings: Settings,
    service: &ConfigService,
    clock: &Arc<ManualClock>,
) -> (Loop, mpsc::UnboundedSender<Cmd>, mpsc::UnboundedSender<Exit>) {
    let mut backends = Registry::default();
    if let Some(b) = backend {
        backends.register(b).unwrap();
    }
    let shared = Arc::new(RwLock::new(Shared::of(&backends)));
    let (cmds, cmds_rx) = mpsc::unbounded_channel();
    let (exits, exits_rx) = mpsc::unbounded_channel();
    let lp = Loop::new(store, backends, settings, shared, service.subscribe(), cmds_rx, exits_rx, clock.clone());
    (lp, cmds, exits)
}

struct Harness {
    lp: Loop,
    clock: Arc<ManualClock>,
    backend: Arc<FakeBackend>,
    config: Arc<ConfigService>,
    _cmds: mpsc::UnboundedSender<Cmd>,
    _exits: mpsc::UnboundedSender<Exit>,
}

impl Harness {
    /// A loop under `config` (YAML), its fake backend idle.
    async fn new(config: &str) -> Harness {
        Harness::with_cpus(config, 4.0).await
    }

    /// [`Harness::new`] with a node of `cpus` CPUs.
    async fn with_cpus(config: &str, cpus: f64) -> Harness {
        let dir = std::env::temp_dir().join(crate::clock::new_id("berth_harness"));
        std::fs::create_dir_all(&dir).unwrap();
        let db = Db::connect(&format!("sqlite://{}/berth.db", dir.display())).await.unwrap();
        let service = Arc::new(ConfigService::start(ConfigStore::new(db.clone())).await.unwrap());
        let harness_config = parse_auto(config).expect("a config");
        service.apply(&Caller::anonymous(), &harness_config, &ApplyMeta::default()).await.expect("applies");
        let backend = Arc::new(FakeBackend { cpus, ..FakeBackend::default() });
        let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
        let settings = Settings { data_dir: dir.join("data"), ..Settings::default() };
        let (lp, cmds, exits) = new_loop(JobStore::new(db), Some(backend.clone()), settings, &service, &clock);
        Harness { lp, clock, backend, config: service, _cmds: cmds, _exits: exits }
    }

    /// The server stops without another write and starts again on the same database: a new
    /// loop recovers the jobs, with the fake backend when `backend_kept`, else with none.
    async fn restart(&mut self, backend_kept: bool) {
        let backend = backend_kept.then(|| self.backend.clone());
        let (lp, cmds, exits) = new_loop(self.lp.store.clone(), backend, self.lp.settings.clone(), &self.config, &self.clock);
        (self.lp, self._cmds, self._exits) = (lp, cmds, exits);
        self.lp.recover().await.expect("recovers");
    }

    /// How the backend reports the current run of `id` after the next restart.
    fn adopt_as(&self, id: &str, adopted: Adopted) {
        let run = self.lp.state.jobs[id].run();
        self.backend.adopt_as.lock().unwrap().insert(run.key(), adopted);
    }

    /// Submits a job (as the jobs service prepares it) and runs a cycle; its id.
    async fn submit(&mut self, request: serde_json::Value) -> String {
        let req: JobRequest = serde_json::from_value(request).expect("a request");
        let active = self.config.active();
        let row = crate::services::jobs::prepare(&active.compiled, active.version, &self.lp.state.nodes, req, "tester", None, self.clock.now_us()).expect("prepared");
        let id = row.id.clone();
        self.lp.store.insert(None, std::slice::from_ref(&row), &[]).await.expect("stored");
        self.lp.cycle(vec![Cmd::Enqueue(vec![row])], Vec::new(), Vec::new(), false).await;
        id
    }

    /// One cycle with the tick's checks (timeouts, backoffs, capacity).
    async fn tick(&mut self) {
        self.lp.cycle(Vec::new(), Vec::new(), Vec::new(), true).await;
    }

    /// The current run of `id` exits with `code`; a cycle takes it in.
    async fn exit(&mut self, id: &str, code: i32) {
        let run = self.lp.state.jobs[id].run();
        self.lp.cycle(Vec::new(), Vec::new(), vec![Exit { run, outcome: Outcome::Exited(code) }], false).await;
    }

    /// The job's state: in memory while it is live, else as stored.
    async fn state(&self, id: &str) -> JobState {
        match self.lp.state.jobs.get(id) {
            Some(l) => l.row.state,
            None => self.lp.store.get(id).await.expect("stored").state,
        }
    }

    fn reason(&self, id: &str) -> String {
        self.lp.state.waiting.get(id).map(|w| w.reason.to_string()).or_else(|| self.lp.state.jobs.get(id)?.row.reason.clone()).unwrap_or_default()
    }

    fn started(&self) -> Vec<String> {
        self.backend.started.lock().unwrap().iter().map(RunId::key).collect()
    }

    fn stopped(&self) -> Vec<String> {
        self.backend.stopped.lock().unwrap().iter().map(RunId::key).collect()
    }
}

const TEAM: &str = "
resource_flavors:
  - name: any
resource_queues:
  - name: team
    preemption:
      within_resource_queue: lower_priority
    resource_groups:
      - covered_resources: [cpu]
        flavors:
          - name: any
            resources:
              - name: cpu
                nominal_quota: 2
scheduling_rules:
  - resource_queue: team
";

fn job(name: &str) -> serde_json::Value {
    serde_json::json!({"name": name, "entrypoint": "true", "resources": {"cpu": 1}})
}

#[tokio::test]
async fn jobs_are_admitted_in_order_within_quota_and_the_next_starts_when_one_ends() {
    let mut h = Harness::new(TEAM).await;
    let a = h.submit(job("a")).await;
    let b = h.submit(job("b")).await;
    let c = h.submit(job("c")).await;
    assert_eq!((h.state(&a).await, h.state(&b).await, h.state(&c).await), (JobState::Running, JobState::Running, JobState::Pending));
    assert_eq!(h.started(), [format!("{a}-r1"), format!("{b}-r1")]);
    assert!(h.reason(&c).contains("quota"), "{}", h.reason(&c));
    h.exit(&a, 0).await;
    assert_eq!(h.state(&a).await, JobState::Succeeded);
    assert_eq!(h.state(&c).await, JobState::Running, "the freed slot goes to the next job in the same cycle");
}

#[tokio::test]
async fn the_end_of_the_last_live_job_is_written_at_once_not_a_flush_later() {
    let mut h = Harness::new(TEAM).await;
    let a = h.submit(job("a")).await;
    let b = h.submit(job("b")).await;
    h.exit(&a, 0).await;
    assert!(h.lp.committing.is_none(), "b still runs: a's end rides with a later write");
    assert_eq!(h.lp.store.get(&a).await.unwrap().state, JobState::Running);
    h.exit(&b, 0).await;
    let write = h.lp.committing.take().expect("nothing is left to run: the ends are written now");
    h.lp.committed(write.await, true);
    assert_eq!((h.lp.store.get(&a).await.unwrap().state, h.lp.store.get(&b).await.unwrap().state), (JobState::Succeeded, JobState::Succeeded));
}

#[tokio::test]
async fn a_job_past_its_timeout_is_stopped_and_timed_out() {
    let mut h = Harness::new(TEAM).await;
    let a = h.submit(serde_json::json!({"entrypoint": "sleep 100", "resources": {"cpu": 1}, "timeout_s": 10})).await;
    assert_eq!(h.state(&a).await, JobState::Running);
    h.clock.advance(Duration::from_secs(9));
    h.tick().await;
    assert_eq!(h.state(&a).await, JobState::Running, "not yet at 9 s");
    h.clock.advance(Duration::from_secs(2));
    h.tick().await;
    assert_eq!(h.state(&a).await, JobState::TimedOut);
    assert_eq!(h.stopped(), [format!("{a}-r1")]);
}

#[tokio::test]
async fn a_failed_run_is_retried_after_its_backoff_not_before() {
    let mut h = Harness::new(TEAM).await;
    let a = h.submit(serde_json::json!({"entrypoint": "false", "resources": {"cpu": 1}, "max_retries": 2})).await;
    h.exit(&a, 1).await;
    assert_eq!(h.state(&a).await, JobState::Pending);
    h.tick().await;
    assert_eq!(h.state(&a).await, JobState::Pending, "the 1 s backoff has not passed");
    assert!(h.reason(&a).contains("retry 1 of 2"), "{}", h.reason(&a));
    h.clock.advance(Duration::from_millis(1100));
    h.tick().await;
    assert_eq!(h.state(&a).await, JobState::Running);
    h.exit(&a, 1).await;
    h.clock.advance(Duration::from_millis(1500));
    h.tick().await;
    assert_eq!(h.state(&a).await, JobState::Pending, "the second backoff is 2 s");
    h.clock.advance(Duration::from_millis(600));
    h.tick().await;
    assert_eq!(h.state(&a).await, JobState::Running);
    h.exit(&a, 1).await;
    assert_eq!(h.state(&a).await, JobState::Failed, "the last retry failed for good");
    assert_eq!(h.started(), [format!("{a}-r1"), format!("{a}-r2"), format!("{a}-r3")]);
}

#[tokio::test]
async fn a_higher_priority_job_preempts_a_lower_one_in_its_queue() {
    let mut h = Harness::new(TEAM).await;
    let low = h.submit(serde_json::json!({"entrypoint": "sleep 100", "resources": {"cpu": 2}, "priority": 1})).await;
    assert_eq!(h.state(&low).await, JobState::Running);
    let high = h.submit(serde_json::json!({"name": "urgent", "entrypoint": "sleep 100", "resources": {"cpu": 2}, "priority": 5})).await;
    assert_eq!(h.stopped(), [format!("{low}-r1")]);
    assert_eq!(h.state(&low).await, JobState::Pending);
    // Named by its name, not its id.
    let reason = h.lp.state.jobs[&*low].row.reason.clone().unwrap_or_default();
    assert!(reason.contains("preempted by urgent"), "{reason}");
    h.tick().await;
    assert_eq!(h.state(&high).await, JobState::Running);
    assert_eq!(h.state(&low).await, JobState::Pending);
}

#[tokio::test]
async fn an_apply_reroutes_waiting_jobs_and_spares_running_ones() {
    let mut h = Harness::new(TEAM).await;
    let a = h.submit(serde_json::json!({"entrypoint": "x", "resources": {"cpu": 2}})).await;
    let b = h.submit(serde_json::json!({"entrypoint": "x", "resources": {"cpu": 2}, "labels": {"team": "other"}})).await;
    assert_eq!((h.state(&a).await, h.state(&b).await), (JobState::Running, JobState::Pending));
    let other = "
resource_flavors:
  - name: any
resource_queues:
  - name: team
    resource_groups:
      - covered_resources: [cpu]
        flavors:
          - name: any
            resources:
              - name: cpu
                nominal_quota: 2
  - name: other
    resource_groups:
      - covered_resources: [cpu]
        flavors:
          - name: any
scheduling_rules:
  - resource_queue: other
    selector:
      - key: team
        operator: in
        values: [other]
  - resource_queue: team
";
    let cfg = parse_auto(other).expect("the new config parses");
    h.config.apply(&Caller::anonymous(), &cfg, &ApplyMeta::default()).await.expect("applies");
    h.lp.reload_config();
    h.tick().await;
    assert_eq!(h.lp.state.jobs[&*b].row.queue.as_deref(), Some("other"), "the waiting job follows the new rules");
    assert_eq!(h.state(&b).await, JobState::Running, "and runs in its new queue");
    assert_eq!(h.lp.state.jobs[&*a].row.queue.as_deref(), Some("team"), "the running job stays where it was admitted");
    assert!(h.stopped().is_empty(), "an apply stops nothing");
}

#[tokio::test]
async fn a_restart_adopts_running_runs_requeues_unstarted_ones_and_records_ended_ones() {
    let mut h = Harness::new(TEAM).await;
    let a = h.submit(serde_json::json!({"entrypoint": "sleep 100", "resources": {"cpu": 1}})).await;
    let b = h.submit(serde_json::json!({"entrypoint": "sleep 100", "resources": {"cpu": 1}})).await;
    assert_eq!((h.state(&a).await, h.state(&b).await), (JobState::Running, JobState::Running));
    h.adopt_as(&a, Adopted::Running { handle: "h-again".into() });
    // b's run: the backend never heard of it (the server died between deciding and starting).
    h.restart(true).await;
    assert_eq!(h.state(&a).await, JobState::Running, "a run still going is adopted");
    assert_eq!(h.lp.state.jobs[&*a].row.handle.as_deref(), Some("h-again"));
    assert_eq!(h.state(&b).await, JobState::Pending, "a run never started goes back to its queue");
    h.tick().await;
    assert_eq!(h.state(&b).await, JobState::Running);
    assert_eq!(h.started().last(), Some(&format!("{b}-r1")), "started again under its first run id: no retry spent");

    h.adopt_as(&a, Adopted::Ended(Outcome::Exited(0)));
    h.adopt_as(&b, Adopted::Ended(Outcome::Exited(3)));
    h.restart(true).await;
    assert_eq!(h.state(&a).await, JobState::Succeeded, "a run that ended while the server was away counts");
    assert_eq!(h.state(&b).await, JobState::Failed);
}

#[tokio::test]
async fn a_backends_own_time_limit_times_the_job_out_without_a_retry() {
    let mut h = Harness::new(TEAM).await;
    let a = h.submit(serde_json::json!({"entrypoint": "sleep 100", "resources": {"cpu": 1}, "max_retries": 3})).await;
    let b = h.submit(serde_json::json!({"entrypoint": "sleep 100", "resources": {"cpu": 1}, "max_retries": 3})).await;
    assert_eq!((h.state(&a).await, h.state(&b).await), (JobState::Running, JobState::Running));
    // While the server runs...
    let run = h.lp.state.jobs[&*a].run();
    h.lp.cycle(Vec::new(), Vec::new(), vec![Exit { run, outcome: Outcome::TimedOut("the cluster's limit".into()) }], false).await;
    assert_eq!(h.state(&a).await, JobState::TimedOut);
    let row = match h.lp.state.jobs.get(&*a) {
        Some(l) => l.row.clone(),
        None => h.lp.store.get(&a).await.expect("stored"),
    };
    assert_eq!((row.reason.as_deref(), row.retries, row.exit_code), (Some("the cluster's limit"), 0, None));
    // ...and found after a restart.
    h.adopt_as(&b, Adopted::Ended(Outcome::TimedOut("ended while away".into())));
    h.restart(true).await;
    assert_eq!(h.state(&b).await, JobState::TimedOut);
    assert_eq!(h.lp.store.get(&b).await.expect("stored").retries, 0, "not retried");
}

#[tokio::test]
async fn a_restart_without_the_jobs_backend_fails_its_runs_and_says_why() {
    let mut h = Harness::new(TEAM).await;
    let a = h.submit(serde_json::json!({"entrypoint": "sleep 100", "resources": {"cpu": 1}})).await;
    assert_eq!(h.state(&a).await, JobState::Running);
    h.restart(false).await;
    assert_eq!(h.state(&a).await, JobState::Failed);
    let row = h.lp.store.get(&a).await.expect("stored");
    assert!(row.reason.as_deref().unwrap_or_default().contains("backend `fake` is not configured any more"), "{:?}", row.reason);
}
