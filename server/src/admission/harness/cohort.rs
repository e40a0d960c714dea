//! Cohorts through the loop: borrowing up to the limit (with its event and history), a
//! lending limit, reclaim (`any`, `lower_priority`, `never`) with victims requeued at their
//! enqueue time and events naming lender and borrower, and borrowing by preemption.

use std::time::Duration;

use app::jobs::Event;

use super::*;
use crate::store::jobs::{EventFilter, HistoryQuery};

/// Queues in cohort `research`, 2 CPUs each, routed by `team` label (`team-a` takes `a` and
/// what no rule takes): (name, extra YAML of the queue's `preemption`, extra YAML of its cpu
/// quota), indented to match.
fn cohort(queues: &[(&str, &str, &str)]) -> String {
    let mut yaml = String::from("\nresource_flavors:\n  - name: any\nresource_queues:");
    for (name, preemption, quota) in queues {
        yaml.push_str(&format!(
            "
  - name: {name}
    cohort_name: research{preemption}
    resource_groups:
      - covered_resources: [cpu]
        flavors:
          - name: any
            resources:
              - name: cpu
                nominal_quota: 2{quota}"
        ));
    }
    yaml.push_str("\nscheduling_rules:");
    for (name, ..) in queues.iter().filter(|q| q.0 != "team-a") {
        let team = name.trim_start_matches("team-");
        yaml.push_str(&format!("\n  - resource_queue: {name}\n    selector:\n      - key: team\n        operator: in\n        values: [{team}]"));
    }
    yaml.push_str("\n  - resource_queue: team-a\n");
    yaml
}

/// `team-a` and `team-b` (see [`cohort`]).
fn research(a_preemption: &str, a_quota: &str, b_preemption: &str, b_quota: &str) -> String {
    cohort(&[("team-a", a_preemption, a_quota), ("team-b", b_preemption, b_quota)])
}

fn reclaim(policy: &str) -> String {
    format!("\n    preemption:\n      reclaim_within_cohort: {policy}")
}

fn job_of(team: &str, priority: i64) -> serde_json::Value {
    serde_json::json!({"entrypoint": "sleep 100", "resources": {"cpu": 1}, "labels": {"team": team}, "priority": priority})
}

impl Harness {
    /// Submits `n` jobs to `team`, a second apart (so they start in that order).
    async fn submit_n(&mut self, team: &str, priority: i64, n: usize) -> Vec<String> {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(self.submit(job_of(team, priority)).await);
            self.clock.advance(Duration::from_secs(1));
        }
        ids
    }

    async fn events(&self, kind: &str) -> Vec<Event> {
        let filter = EventFilter { kinds: vec![kind.into()], ..EventFilter::default() };
        self.lp.store.events(&filter, None, 100).await.expect("events").0
    }

    async fn count(&self, ids: &[String], state: JobState) -> usize {
        let mut n = 0;
        for id in ids {
            n += usize::from(self.state(id).await == state);
        }
        n
    }
}

#[tokio::test]
async fn a_queue_borrows_idle_quota_up_to_its_limit_and_it_is_recorded() {
    let limit = "\n                borrowing_limit: 1";
    let mut h = Harness::with_cpus(&research("", limit, "", ""), 16.0).await;
    let a = h.submit_n("a", 0, 4).await;
    assert_eq!(h.count(&a, JobState::Running).await, 3, "2 of its own and 1 borrowed");
    assert_eq!(h.state(&a[3]).await, JobState::Pending);
    assert_eq!(
        h.reason(&a[3]),
        "queue team-a: flavor any: cpu nominal 2, in use 3, requested 1; cohort research has 1 idle of 4 lendable; \
         borrowing limit 1, borrowed 1"
    );
    let borrowed = h.events("borrowed").await;
    assert_eq!(borrowed.len(), 1, "{borrowed:#?}");
    assert_eq!(borrowed[0].job_id.as_deref(), Some(a[2].as_str()));
    assert_eq!(borrowed[0].message, "borrows cpu 1 of flavor any from cohort research (lent by team-b)");
    assert_eq!(borrowed[0].detail["cohort"], "research");

    // The history records the borrowed CPU for team-a, none for team-b.
    h.lp.last_sample = None;
    h.tick().await;
    let q = HistoryQuery { since_us: 0, until_us: i64::MAX, step_us: 1, queue: None, flavor: None, resource: None, cohort: None, queues: vec![] };
    let samples = h.lp.store.history(&q).await.expect("history");
    let last = |queue: &str| samples.iter().rev().find(|s| s.queue == queue).expect("a sample").clone();
    assert_eq!((last("team-a").used, last("team-a").borrowed), (3.0, 1.0));
    assert_eq!((last("team-b").used, last("team-b").borrowed), (0.0, 0.0));
}

#[tokio::test]
async fn a_lending_limit_keeps_the_rest_for_the_lender() {
    let lend = "\n                lending_limit: 1";
    let mut h = Harness::with_cpus(&research("", "", "", lend), 16.0).await;
    let a = h.submit_n("a", 0, 4).await;
    assert_eq!(h.count(&a, JobState::Running).await, 3, "team-b lends 1 of its 2");
    assert!(h.reason(&a[3]).contains("cohort research has 0 idle of 3 lendable"), "{}", h.reason(&a[3]));
    let b = h.submit(job_of("b", 0)).await;
    assert_eq!(h.state(&b).await, JobState::Running, "the part it does not lend is there at once");
    assert!(h.stopped().is_empty(), "nobody was preempted for it");
}

#[tokio::test]
async fn a_lender_reclaims_with_any_and_the_victim_keeps_its_enqueue_time() {
    let mut h = Harness::with_cpus(&research("", "", &reclaim("any"), ""), 16.0).await;
    let a = h.submit_n("a", 5, 4).await;
    assert_eq!(h.count(&a, JobState::Running).await, 4, "team-a borrows team-b's 2 idle CPUs");
    let enqueued = h.lp.state.jobs[&*a[3]].row.enqueued_at_us;
    let b = h.submit(job_of("b", 0)).await;
    // The most recently started borrower goes, whatever its priority (`any`).
    assert_eq!(h.stopped(), [format!("{}-r1", a[3])]);
    assert_eq!(h.state(&a[3]).await, JobState::Pending);
    assert_eq!(h.lp.state.jobs[&*a[3]].row.enqueued_at_us, enqueued, "requeued with its enqueue time");
    assert_eq!(h.state(&b).await, JobState::Running);

    let preempted = h.events("preempted").await;
    assert_eq!(preempted.len(), 1);
    let e = &preempted[0];
    assert_eq!(e.job_id.as_deref(), Some(a[3].as_str()));
    let b_name = h.lp.state.jobs[&*b].row.name.clone();
    assert_eq!(e.message, format!("preempted by {b_name}: queue team-b reclaims its quota from team-a in cohort research"));
    assert_eq!((&e.detail["cause"], &e.detail["lender"], &e.detail["borrower"]), (&"reclaim".into(), &"team-b".into(), &"team-a".into()));
    let reclaimed = h.events("reclaimed").await;
    assert_eq!(reclaimed.len(), 1);
    assert_eq!(reclaimed[0].job_id.as_deref(), Some(b.as_str()));
    assert_eq!(reclaimed[0].message, format!("queue team-b reclaims quota from team-a in cohort research: preempts {}", a[3]));
}

#[tokio::test]
async fn lower_priority_reclaims_only_lower_priority_borrowers() {
    let mut h = Harness::with_cpus(&research("", "", &reclaim("lower_priority"), ""), 16.0).await;
    let a = h.submit_n("a", 5, 4).await;
    let low = h.submit(job_of("b", 1)).await;
    assert_eq!(h.state(&low).await, JobState::Pending);
    assert!(h.stopped().is_empty());
    assert!(h.reason(&low).ends_with("no lower-priority job of a borrowing peer to reclaim"), "{}", h.reason(&low));
    let high = h.submit(job_of("b", 9)).await;
    assert_eq!(h.state(&high).await, JobState::Running);
    assert_eq!(h.stopped(), [format!("{}-r1", a[3])]);
    assert_eq!(h.state(&low).await, JobState::Pending, "team-b is at its nominal again");
}

#[tokio::test]
async fn never_waits_for_the_borrowers_to_finish() {
    let mut h = Harness::with_cpus(&research("", "", &reclaim("never"), ""), 16.0).await;
    let a = h.submit_n("a", 0, 4).await;
    let b = h.submit(job_of("b", 9)).await;
    assert_eq!(h.state(&b).await, JobState::Pending);
    assert!(h.stopped().is_empty(), "never preempts");
    assert!(h.reason(&b).contains("reclaim_within_cohort is never: it waits for them to finish"), "{}", h.reason(&b));
    h.exit(&a[0], 0).await;
    assert_eq!(h.state(&b).await, JobState::Running, "the first CPU team-a gives back goes to team-b");
}

#[tokio::test]
async fn borrow_within_cohort_preempts_a_lower_priority_borrower_to_borrow() {
    // team-c idles (its 2 CPUs lent to team-b); team-a is at its nominal and wants to borrow.
    let borrow = "\n    preemption:\n      reclaim_within_cohort: lower_priority\n      borrow_within_cohort: lower_priority";
    let config = cohort(&[("team-a", borrow, ""), ("team-b", "", ""), ("team-c", "", "")]);
    let mut h = Harness::with_cpus(&config, 16.0).await;
    let a = h.submit_n("a", 5, 2).await;
    let b = h.submit_n("b", 1, 4).await;
    assert_eq!(h.count(&b, JobState::Running).await, 4, "team-b borrows team-c's idle quota");
    let p = h.submit(job_of("a", 5)).await;
    assert_eq!(h.state(&p).await, JobState::Running);
    assert_eq!(h.stopped(), [format!("{}-r1", b[3])]);
    let e = &h.events("preempted").await[0];
    assert_eq!(e.detail["cause"], "borrow");
    assert!(e.message.contains("queue team-a borrows what team-b was borrowing in cohort research"), "{}", e.message);
    assert_eq!(h.count(&a, JobState::Running).await, 2);
}
