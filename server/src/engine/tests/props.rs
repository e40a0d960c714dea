//! Property tests: invariants of any plan for random configs, nodes and jobs, cohorts
//! included.
//!
//! After applying a plan (stop victims, start admissions): no quota cell outside a cohort
//! goes over its nominal quota, no cell of a cohort over nominal plus its borrowing limit, no
//! cohort over the sum of its members' nominal quotas (nor what they lend), no node over its
//! capacity (cells already over, e.g. after a config change, may only go down); same
//! snapshot, same plan — whatever the input order; no job both admitted and preempted; every
//! victim named with its cause: within the preemptor's queue (strictly lower priority,
//! `within_resource_queue: lower_priority`), a reclaim or a borrow (a cohort peer that was
//! borrowing, as the preemptor's `reclaim_within_cohort` and `borrow_within_cohort` allow);
//! `never` never preempts; no victim chosen twice; every pending job is either admitted or
//! has a reason and a position, positions per queue being 1..n.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use app::config::{selector, CohortPreemption, WithinQueuePreemption};
use proptest::prelude::*;

use super::fixtures::*;
use crate::engine::*;

const FLAVORS: [&str; 3] = ["f0", "f1", "f2"];

#[derive(Debug, Clone)]
struct QueueSpec {
    split_groups: bool,
    flavors: Vec<usize>,
    quotas: Vec<(u8, u8)>,
    preemption: u8,
    ordering: u8,
    placement: u8,
    strict: bool,
    /// 0: no cohort; 1, 2: cohort c0; 3: cohort c1.
    cohort: u8,
    /// Lending and borrowing limit codes (see [`limit`]).
    lend: u8,
    borrow: u8,
    /// 0 never, 1 lower_priority, 2 any; `borrow_within_cohort: lower_priority` on top.
    reclaim: u8,
    borrow_preempt: bool,
    weight: Option<u8>,
}

#[derive(Debug, Clone)]
struct World {
    queues: Vec<QueueSpec>,
    nodes: Vec<(u8, u8, u8)>,
    running: Vec<(u8, u8, u8, u8, u8, u8, i64)>,
    pending: Vec<(u8, u8, u8, u8, i64)>,
}

fn quota(code: u8) -> Option<f64> {
    match code % 6 {
        0 => None,
        1 => Some(0.0),
        k => Some(f64::from(k) * 2.5),
    }
}

/// A limit from a code: none, 0, or a multiple of 1.25.
fn limit(code: u8) -> Option<f64> {
    match code % 5 {
        0 => None,
        k => Some(f64::from(k - 1) * 1.25),
    }
}

fn queue_spec() -> impl Strategy<Value = QueueSpec> {
    (
        (any::<bool>(), proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3).prop_shuffle(), proptest::collection::vec((any::<u8>(), any::<u8>()), 3)),
        (0u8..4, 0u8..3, 0u8..2, any::<bool>()),
        (0u8..4, any::<u8>(), any::<u8>(), 0u8..3, any::<bool>(), proptest::option::of(0u8..4)),
    )
        .prop_map(|((split_groups, flavors, quotas), (preemption, ordering, placement, strict), (cohort, lend, borrow, reclaim, borrow_preempt, weight))| QueueSpec {
            split_groups,
            flavors,
            quotas,
            preemption,
            ordering,
            placement,
            strict,
            cohort,
            lend,
            borrow,
            reclaim,
            borrow_preempt,
            weight,
        })
}

fn world() -> impl Strategy<Value = World> {
    (
        proptest::collection::vec(queue_spec(), 1..=3),
        proptest::collection::vec((0u8..3, 0u8..=16, 0u8..=8), 1..=5),
        proptest::collection::vec((any::<u8>(), 0u8..=4, 0u8..=2, 0u8..4, any::<u8>(), any::<u8>(), 0i64..10), 0..=6),
        proptest::collection::vec((any::<u8>(), 0u8..=6, 0u8..=3, 0u8..4, 0i64..6), 0..=14),
    )
        .prop_map(|(queues, nodes, running, pending)| World { queues, nodes, running, pending })
}

/// Worlds crowded into cohorts: 2 to 4 queues that each join one, finite quotas, roomy
/// nodes and more running jobs, so borrowing, lending limits and reclaims are the rule.
fn cohort_world() -> impl Strategy<Value = World> {
    let spec = (queue_spec(), 1u8..4, proptest::collection::vec((2u8..6, 2u8..6), 3)).prop_map(|(mut q, cohort, quotas)| {
        q.cohort = cohort;
        q.quotas = quotas;
        q
    });
    (
        proptest::collection::vec(spec, 2..=4),
        proptest::collection::vec((0u8..3, 12u8..=16, 6u8..=8), 2..=5),
        proptest::collection::vec((any::<u8>(), 1u8..=4, 0u8..=2, 0u8..4, any::<u8>(), any::<u8>(), 0i64..10), 4..=14),
        proptest::collection::vec((any::<u8>(), 0u8..=6, 0u8..=3, 0u8..4, 0i64..6), 0..=14),
    )
        .prop_map(|(queues, nodes, running, pending)| World { queues, nodes, running, pending })
}

fn build(w: &World) -> (Compiled, Vec<Node>, Vec<RunningJob>, Vec<PendingJob>) {
    let mut cfg = config().flavor("f0", &[("pool", "p0")]).flavor("f1", &[("pool", "p1")]).flavor("f2", &[]);
    let mut groups: Vec<Vec<(Vec<&str>, Vec<&str>)>> = Vec::new();
    for (i, q) in w.queues.iter().enumerate() {
        let mut b = queue(&format!("q{i}"));
        let fl: Vec<&'static str> = q.flavors.iter().map(|&f| FLAVORS[f]).collect();
        let quotas = |fs: &[&'static str], res: &[&'static str]| -> Vec<(&'static str, Vec<(&'static str, Option<f64>)>)> {
            fs.iter()
                .zip(&q.quotas)
                .map(|(f, qq)| (*f, res.iter().map(|&r| (r, quota(if r == "cpu" { qq.0 } else { qq.1 }))).collect()))
                .collect()
        };
        let mut gs = Vec::new();
        if q.split_groups && fl.len() >= 2 {
            // A flavor appears at most once per queue, so the two groups split the flavors.
            let (a, c) = fl.split_at(fl.len() / 2);
            b = b.group_f(&["cpu"], &quotas(a, &["cpu"])).group_f(&["gpu"], &quotas(c, &["gpu"]));
            gs.push((vec!["cpu"], a.to_vec()));
            gs.push((vec!["gpu"], c.to_vec()));
        } else {
            b = b.group_f(&["cpu", "gpu"], &quotas(&fl, &["cpu", "gpu"]));
            gs.push((vec!["cpu", "gpu"], fl.clone()));
        }
        groups.push(gs);
        b = match q.preemption {
            0 => b,
            1 => b.preemption(WithinQueuePreemption::Never),
            _ => b.preemption(WithinQueuePreemption::LowerPriority),
        };
        b = b.ordering(["fifo", "large_resource", "small_first"][q.ordering as usize]);
        b = b.placement(["bin_packing", "spread"][q.placement as usize]);
        if q.strict {
            b = b.strict();
        }
        if q.cohort > 0 {
            b = b.cohort(if q.cohort == 3 { "c1" } else { "c0" });
            let reclaim = [CohortPreemption::Never, CohortPreemption::LowerPriority, CohortPreemption::Any][q.reclaim as usize];
            b = b.reclaim(reclaim);
            if q.borrow_preempt && reclaim != CohortPreemption::Never {
                b = b.borrow_within(CohortPreemption::LowerPriority);
            }
            if let Some(w) = q.weight {
                b = b.weight(f64::from(w) * 0.5);
            }
            for (i, f) in fl.iter().enumerate() {
                for r in ["cpu", "gpu"] {
                    let code = if r == "cpu" { q.quotas[i].0 } else { q.quotas[i].1 };
                    // A lending limit above nominal is refused by the validator, clamped by compile.
                    let lend = limit(q.lend.wrapping_add(i as u8)).map(|l| quota(code).map_or(l, |n| l.min(n)));
                    b = b.limits(f, r, lend, limit(q.borrow.wrapping_add(i as u8)));
                }
            }
        }
        cfg = cfg.queue(b);
    }
    let config = cfg.compile();
    let nodes: Vec<Node> = w
        .nodes
        .iter()
        .enumerate()
        .map(|(i, &(pool, cpu, gpu))| {
            let n = node(&format!("n{i}")).cap(&[("cpu", cpu.into()), ("gpu", gpu.into())]);
            if pool < 2 {
                n.label("pool", &format!("p{pool}"))
            } else {
                n
            }
        })
        .collect();
    let nq = w.queues.len();
    let running = w
        .running
        .iter()
        .enumerate()
        .filter_map(|(i, &(q, cpu, gpu, prio, f, n, started))| {
            let qi = q as usize % nq;
            let node_id = if nodes.is_empty() { "gone".to_string() } else { nodes[n as usize % nodes.len()].id.to_string() };
            let mut job = running(&format!("r{i}"), &format!("q{qi}"))
                .prio(prio.into())
                .req(&[("cpu", cpu.into()), ("gpu", gpu.into())])
                .on("unused", &node_id)
                .started(started);
            // Charged the way an admission would: one flavor per group it touches.
            job.flavors = groups[qi]
                .iter()
                .filter_map(|(res, fl)| {
                    let resources: Vec<Name> =
                        res.iter().filter(|r| job.request.get(r) != Milli::ZERO).map(|&r| r.into()).collect();
                    (!resources.is_empty())
                        .then(|| FlavorAssignment { flavor: fl[f as usize % fl.len()].into(), resources })
                })
                .collect();
            (!job.request.is_empty()).then_some(job)
        })
        .collect();
    let pending = w
        .pending
        .iter()
        .enumerate()
        .map(|(i, &(q, cpu, gpu, prio, at))| {
            let queue = if q % 17 == 16 { "ghost".to_string() } else { format!("q{}", q as usize % nq) };
            pending(&format!("p{i}"), &queue).prio(prio.into()).req(&[("cpu", cpu.into()), ("gpu", gpu.into())]).at(at)
        })
        .collect();
    (config, nodes, running, pending)
}

type Cells = BTreeMap<(String, String, String), Milli>;

fn quota_usage(jobs: &[(&Name, &Resources, &[FlavorAssignment])]) -> Cells {
    let mut out = Cells::new();
    for (q, req, flavors) in jobs {
        for fa in *flavors {
            for r in &fa.resources {
                let cell = out.entry((q.to_string(), fa.flavor.to_string(), r.to_string())).or_default();
                *cell = cell.plus(req.get(r));
            }
        }
    }
    out
}

fn node_usage(jobs: &[(&Name, &Resources)]) -> BTreeMap<(String, String), Milli> {
    let mut out = BTreeMap::new();
    for (n, req) in jobs {
        for (r, a) in req.iter() {
            let cell: &mut Milli = out.entry((n.to_string(), r.to_string())).or_default();
            *cell = cell.plus(a);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn plans_keep_every_invariant(w in prop_oneof![world(), cohort_world()]) {
        let (config, nodes, running, pending) = build(&w);
        let snap = Snapshot { now_ms: 7, config: &config, nodes: &nodes, running: &running, pending: &pending, limits: &[] };
        let plan = schedule(&snap);

        // Same snapshot, same plan — also with every input list reversed.
        prop_assert_eq!(&plan, &schedule(&snap));
        let (mut n2, mut r2, mut p2) = (nodes.clone(), running.clone(), pending.clone());
        n2.reverse();
        r2.reverse();
        p2.reverse();
        let reversed = Snapshot { now_ms: 7, config: &config, nodes: &n2, running: &r2, pending: &p2, limits: &[] };
        prop_assert_eq!(&plan, &schedule(&reversed));

        let admitted: BTreeSet<&str> = plan.admissions.iter().map(|a| &*a.job).collect();
        prop_assert_eq!(admitted.len(), plan.admissions.len(), "admitted twice");
        let victims: Vec<&str> = plan.victims().map(|v| &**v).collect();
        let victim_set: BTreeSet<&str> = victims.iter().copied().collect();
        prop_assert_eq!(victim_set.len(), victims.len(), "a victim preempted twice");
        prop_assert!(admitted.is_disjoint(&victim_set), "admitted and preempted");

        let pend: BTreeMap<&str, &PendingJob> = pending.iter().map(|p| (&*p.id, p)).collect();
        let run: BTreeMap<&str, &RunningJob> = running.iter().map(|r| (&*r.id, r)).collect();
        let cells = config.quota_cells();
        let before_q: Vec<_> = running.iter().map(|r| (&r.queue, &r.request, r.flavors.as_slice())).collect();
        let qb = quota_usage(&before_q);
        let spec = |q: &str| &w.queues[q[1..].parse::<usize>().unwrap()];
        for p in &plan.preemptions {
            let preemptor = pend[&*p.preemptor];
            prop_assert!(admitted.contains(&*p.preemptor), "preemptor not admitted");
            prop_assert_eq!(&preemptor.queue, &p.queue);
            let mine = spec(&p.queue);
            for v in &p.victims {
                let victim = run.get(&*v.job).expect("victims are running jobs");
                prop_assert_eq!(&victim.queue, &v.queue);
                match v.cause {
                    Cause::WithinQueue => {
                        prop_assert!(mine.preemption >= 2, "within_resource_queue is not lower_priority");
                        prop_assert!(victim.priority < preemptor.priority, "victim {} not of lower priority", v.job);
                        prop_assert_eq!(&victim.queue, &p.queue, "victim from another queue");
                    }
                    Cause::Reclaim | Cause::Borrow => {
                        let theirs = spec(&v.queue);
                        prop_assert!(v.queue != p.queue && mine.cohort > 0 && (theirs.cohort == 3) == (mine.cohort == 3) && theirs.cohort > 0, "not a cohort peer");
                        prop_assert!(mine.reclaim > 0, "reclaim_within_cohort is never");
                        if mine.reclaim == 1 || v.cause == Cause::Borrow {
                            prop_assert!(victim.priority < preemptor.priority, "victim {} not of lower priority", v.job);
                        }
                        if v.cause == Cause::Borrow {
                            prop_assert!(mine.borrow_preempt, "borrow_within_cohort is never");
                        }
                        // Only a borrower loses a job to a reclaim: its queue was above
                        // nominal in a cell the victim holds, counting what the plan
                        // admitted before the preemptor.
                        let upto = plan.admissions.iter().position(|a| a.job == p.preemptor).unwrap_or(0);
                        let mut then_q = before_q.clone();
                        then_q.extend(plan.admissions[..upto].iter().map(|a| (&a.queue, &pend[&*a.job].request, a.flavors.as_slice())));
                        let then = quota_usage(&then_q);
                        let borrowing = victim.flavors.iter().flat_map(|fa| fa.resources.iter().map(move |r| (fa, r))).any(|(fa, r)| {
                            let used = then.get(&(v.queue.to_string(), fa.flavor.to_string(), r.to_string())).copied().unwrap_or_default();
                            matches!(config.nominal_quota(&v.queue, &fa.flavor, r), Some(Some(n)) if used > n)
                        });
                        prop_assert!(borrowing, "{} preempted from {}, which was not borrowing", v.job, v.queue);
                    }
                }
            }
        }

        // Every pending job: admitted, or waiting with a reason and a position.
        let waiting: BTreeSet<&str> = plan.pending.iter().map(|p| &*p.job).collect();
        prop_assert_eq!(waiting.len(), plan.pending.len());
        for p in &pending {
            prop_assert!(admitted.contains(&*p.id) != waiting.contains(&*p.id), "{} lost or doubled", p.id);
        }
        let mut positions: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for w in &plan.pending {
            prop_assert!(!w.reason.is_empty());
            prop_assert_eq!(&pend[&*w.job].queue, &w.queue);
            positions.entry(&*w.queue).or_default().push(w.position);
        }
        for (q, ps) in positions {
            prop_assert_eq!(ps.clone(), (1..=ps.len()).collect::<Vec<_>>(), "positions of {}", q);
        }

        // Admissions: node matches every chosen flavor, flavors cover exactly the request.
        let flavor_sel = |f: &str| match f { "f0" => Some(labels(&[("pool", "p0")])), "f1" => Some(labels(&[("pool", "p1")])), _ => None };
        for a in &plan.admissions {
            let n = nodes.iter().find(|n| n.id == a.node).expect("admitted to a known node");
            for fa in &a.flavors {
                if let Some(want) = flavor_sel(&fa.flavor) {
                    let sel: Vec<_> = want.iter().map(|(k, v)| is_in(k, &[v])).collect();
                    prop_assert!(selector::matches(Some(&sel), &n.labels), "node {} does not match {}", n.id, fa.flavor);
                }
            }
            let mut covered: Vec<&str> = a.flavors.iter().flat_map(|f| f.resources.iter().map(|r| &**r)).collect();
            covered.sort();
            let requested: Vec<&str> = pend[&*a.job].request.iter().map(|(r, _)| &**r).collect();
            prop_assert_eq!(covered, requested);
        }

        // Apply the plan and compare usage before and after: a cell stays within nominal
        // (outside a cohort) or nominal plus borrowing limit; a cohort within the sum of
        // its members' nominal quotas, and its pool within what they lend.
        let mut after_q: Vec<_> = running.iter().filter(|r| !victim_set.contains(&*r.id)).map(|r| (&r.queue, &r.request, r.flavors.as_slice())).collect();
        after_q.extend(plan.admissions.iter().map(|a| (&a.queue, &pend[&*a.job].request, a.flavors.as_slice())));
        let qa = quota_usage(&after_q);
        let mut cohorts: BTreeMap<(String, String, String), [Milli; 6]> = BTreeMap::new();
        let mut unlimited = BTreeSet::new();
        for c in &cells {
            let key = (c.queue.to_string(), c.flavor.to_string(), c.resource.to_string());
            let (used, was) = (qa.get(&key).copied().unwrap_or_default(), qb.get(&key).copied().unwrap_or_default());
            let Some(nominal) = c.nominal else {
                // An unlimited member lends without limit: its cohort has no sum to keep to.
                if let Some(cohort) = &c.cohort {
                    unlimited.insert((cohort.to_string(), key.1, key.2));
                }
                continue;
            };
            let ceiling = nominal.plus(c.borrowing_limit.unwrap_or(Milli::UNLIMITED));
            prop_assert!(used <= ceiling || used <= was, "quota {:?}: {} > {} + limit (was {})", key, used, nominal, was);
            if let Some(cohort) = &c.cohort {
                let lend = c.lendable.unwrap_or(Milli::UNLIMITED);
                let guaranteed = nominal.minus(lend).max(Milli::ZERO);
                let sum = cohorts.entry((cohort.to_string(), key.1, key.2)).or_default();
                let pool = |u: Milli| u.minus(guaranteed).max(Milli::ZERO);
                for (i, v) in [used, was, nominal, pool(used), pool(was), lend].into_iter().enumerate() {
                    sum[i] = sum[i].plus(v);
                }
            }
        }
        for (key, [used, was, nominal, in_pool, pool_was, lent]) in cohorts.into_iter().filter(|(k, _)| !unlimited.contains(k)) {
            prop_assert!(used <= nominal || used <= was, "cohort {:?}: {} > Σ nominal {} (was {})", key, used, nominal, was);
            prop_assert!(in_pool <= lent || in_pool <= pool_was, "cohort {:?} pool: {} > lent {} (was {})", key, in_pool, lent, pool_was);
        }
        let before_n: Vec<_> = running.iter().map(|r| (&r.node, &r.request)).collect();
        let mut after_n: Vec<_> = running.iter().filter(|r| !victim_set.contains(&*r.id)).map(|r| (&r.node, &r.request)).collect();
        after_n.extend(plan.admissions.iter().map(|a| (&a.node, &pend[&*a.job].request)));
        let (nb, na) = (node_usage(&before_n), node_usage(&after_n));
        for ((n, r), used) in &na {
            let Some(node) = nodes.iter().find(|x| &*x.id == n) else { continue };
            let cap = node.capacity.get(r);
            let was = nb.get(&(n.clone(), r.clone())).copied().unwrap_or_default();
            prop_assert!(*used <= cap || *used <= was, "node {} {}: {} > {} (was {})", n, r, used, cap, was);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// Whenever `quick::exact` accepts a quick plan, it admits and preempts what the plan
    /// over every job does, and tells the offered jobs that wait the same.
    #[test]
    fn an_exact_quick_plan_is_the_full_plan(w in world(), k in 1usize..=3) {
        quick_plan_is_full_plan(&w, k, |_| false)?;
    }

    /// The same when some jobs wait for something else (a hold, a dependency, a backoff):
    /// a quick cycle walks past them and neither offers them nor leaves them out.
    #[test]
    fn an_exact_quick_plan_is_the_full_plan_with_jobs_held(w in world(), k in 1usize..=3, every in 2usize..=4) {
        quick_plan_is_full_plan(&w, k, |i| i % every == 0)?;
    }
}

fn quick_plan_is_full_plan(w: &World, k: usize, held: impl Fn(usize) -> bool) -> Result<(), TestCaseError> {
    let (config, nodes, running, pending) = build(w);
    let held: HashSet<&str> = pending.iter().enumerate().filter(|(i, _)| held(*i)).map(|(_, p)| &*p.id).collect();
    let open: Vec<PendingJob> = pending.iter().filter(|p| !held.contains(&*p.id)).cloned().collect();
    let full = schedule(&Snapshot { now_ms: 7, config: &config, nodes: &nodes, running: &running, pending: &open, limits: &[] });
    let split = quick::offer_open(&config, &pending, k, |p| !held.contains(&*p.id));
    let (offered, cuts): (Vec<PendingJob>, _) = (split.offered.into_iter().cloned().collect(), split.cuts);
    prop_assert!(offered.iter().all(|p| !held.contains(&*p.id)), "a held job is offered");
    let plan = schedule(&Snapshot { now_ms: 7, config: &config, nodes: &nodes, running: &running, pending: &offered, limits: &[] });
    if !cuts.is_empty() && quick::exact(&cuts, &plan) {
        prop_assert_eq!(&plan.admissions, &full.admissions);
        prop_assert_eq!(&plan.preemptions, &full.preemptions);
        // The first of a request behind a queue's first jobs is offered out of its
        // place: its position in the quick plan leaves out the jobs ahead of it.
        let firsts: HashSet<&str> = cuts.iter().flat_map(|c| c.firsts.iter().map(|(id, _)| *id)).collect();
        for p in &plan.pending {
            let mut in_full = full.pending_info(&p.job).cloned();
            if firsts.contains(&*p.job) {
                in_full.iter_mut().for_each(|f| f.position = p.position);
            }
            prop_assert_eq!(Some(p), in_full.as_ref(), "{} waits differently", p.job);
        }
    }
    Ok(())
}

/// The worlds above are not vacuous about cohorts: some plans borrow, reclaim, and borrow by
/// preemption.
#[test]
fn the_generator_exercises_cohorts() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut borrowing, mut reclaims, mut borrows) = (0, 0, 0);
    for _ in 0..3000 {
        let w = cohort_world().new_tree(&mut runner).expect("a tree").current();
        let (config, nodes, running, pending) = build(&w);
        let plan = schedule(&Snapshot { now_ms: 7, config: &config, nodes: &nodes, running: &running, pending: &pending, limits: &[] });
        borrowing += usize::from(plan.admissions.iter().any(|a| !a.borrowed.is_empty()));
        let causes: Vec<Cause> = plan.preemptions.iter().flat_map(|p| p.victims.iter().map(|v| v.cause)).collect();
        reclaims += usize::from(causes.contains(&Cause::Reclaim));
        borrows += usize::from(causes.contains(&Cause::Borrow));
    }
    assert!(borrowing >= 250 && reclaims >= 60 && borrows >= 10, "borrowing {borrowing}, reclaims {reclaims}, borrows {borrows} of 3000");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A lender's guaranteed part (nominal − lending limit) is there for it, whatever its
    /// peers borrowed and though no one preempts: peers first take all they may, then the
    /// lender's jobs that fit its guaranteed part are all admitted at once.
    #[test]
    fn the_guaranteed_part_never_waits(
        (nominal, lend) in (1i64..=10).prop_flat_map(|n| (Just(n), 0..=n)),
        peers in proptest::collection::vec((0i64..=6, proptest::option::of(0i64..=8), 0usize..=20), 1..=3),
        sizes in proptest::collection::vec(1i64..=3, 0..=6),
    ) {
        let mut cfg = config().flavor("any", &[]).queue(
            queue("lender").cohort("c").group(&["cpu"], &[("any", &[("cpu", nominal)])]).limits("any", "cpu", Some(lend as f64), None),
        );
        for (i, (n, limit, _)) in peers.iter().enumerate() {
            cfg = cfg.queue(queue(&format!("p{i}")).cohort("c").group(&["cpu"], &[("any", &[("cpu", *n)])]).limits("any", "cpu", None, limit.map(|l| l as f64)));
        }
        let config = cfg.compile();
        let nodes = vec![node("n").cap(&[("cpu", 1000)])];
        let wanting: Vec<PendingJob> = peers
            .iter()
            .enumerate()
            .flat_map(|(i, (_, _, jobs))| (0..*jobs).map(move |k| pending(&format!("p{i}-{k}"), &format!("p{i}")).req(&[("cpu", 1)])))
            .collect();
        let took = schedule(&Snapshot { now_ms: 0, config: &config, nodes: &nodes, running: &[], pending: &wanting, limits: &[] });
        let running: Vec<RunningJob> = took
            .admissions
            .iter()
            .map(|a| running(&a.job, &a.queue).req(&[("cpu", 1)]).on("any", "n"))
            .collect();
        let guaranteed = nominal - lend;
        let mut mine = Vec::new();
        let mut total = 0;
        for (k, s) in sizes.iter().enumerate() {
            if total + s <= guaranteed {
                total += s;
                mine.push(pending(&format!("l{k}"), "lender").req(&[("cpu", *s)]));
            }
        }
        let plan = schedule(&Snapshot { now_ms: 0, config: &config, nodes: &nodes, running: &running, pending: &mine, limits: &[] });
        prop_assert_eq!(plan.admissions.len(), mine.len(), "{:#?}", plan.pending);
        prop_assert!(plan.preemptions.is_empty());
    }
}
