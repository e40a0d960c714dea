//! Property tests: invariants of any plan for random configs, nodes and jobs.
//!
//! After applying a plan (stop victims, start admissions): no quota cell the plan touched
//! goes over its nominal quota, no node over its capacity (cells already over, e.g. after a
//! config change, may only go down); same snapshot, same plan — whatever the input order; no
//! job both admitted and preempted; no victim of priority ≥ its preemptor, or from another
//! queue, or chosen twice; every pending job is either admitted or has a reason and a
//! position, positions per queue being 1..n.

use std::collections::{BTreeMap, BTreeSet};

use app::config::{selector, WithinQueuePreemption};
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

fn queue_spec() -> impl Strategy<Value = QueueSpec> {
    (
        any::<bool>(),
        proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3).prop_shuffle(),
        proptest::collection::vec((any::<u8>(), any::<u8>()), 3),
        0u8..4,
        0u8..3,
        0u8..2,
        any::<bool>(),
    )
        .prop_map(|(split_groups, flavors, quotas, preemption, ordering, placement, strict)| QueueSpec {
            split_groups,
            flavors,
            quotas,
            preemption,
            ordering,
            placement,
            strict,
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
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn plans_keep_every_invariant(w in world()) {
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
        for p in &plan.preemptions {
            let preemptor = pend[&*p.preemptor];
            prop_assert!(admitted.contains(&*p.preemptor), "preemptor not admitted");
            prop_assert_eq!(&preemptor.queue, &p.queue);
            for v in &p.victims {
                let victim = run.get(&**v).expect("victims are running jobs");
                prop_assert!(victim.priority < preemptor.priority, "victim {} not of lower priority", v);
                prop_assert_eq!(&victim.queue, &p.queue, "victim from another queue");
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

        // Apply the plan and compare usage before and after.
        let before_q: Vec<_> = running.iter().map(|r| (&r.queue, &r.request, r.flavors.as_slice())).collect();
        let mut after_q: Vec<_> = running.iter().filter(|r| !victim_set.contains(&*r.id)).map(|r| (&r.queue, &r.request, r.flavors.as_slice())).collect();
        after_q.extend(plan.admissions.iter().map(|a| (&a.queue, &pend[&*a.job].request, a.flavors.as_slice())));
        let (qb, qa) = (quota_usage(&before_q), quota_usage(&after_q));
        for ((q, f, r), used) in &qa {
            let Some(Some(nominal)) = config.nominal_quota(q, f, r) else { continue };
            let was = qb.get(&(q.clone(), f.clone(), r.clone())).copied().unwrap_or_default();
            prop_assert!(*used <= nominal || *used <= was, "quota {}/{}/{}: {} > {} (was {})", q, f, r, used, nominal, was);
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
        let (config, nodes, running, pending) = build(&w);
        let full = schedule(&Snapshot { now_ms: 7, config: &config, nodes: &nodes, running: &running, pending: &pending, limits: &[] });
        let split = quick::offer(&config, &pending, k);
        let (offered, cuts): (Vec<PendingJob>, _) = (split.offered.into_iter().cloned().collect(), split.cuts);
        let plan = schedule(&Snapshot { now_ms: 7, config: &config, nodes: &nodes, running: &running, pending: &offered, limits: &[] });
        if !cuts.is_empty() && quick::exact(&cuts, &plan) {
            prop_assert_eq!(&plan.admissions, &full.admissions);
            prop_assert_eq!(&plan.preemptions, &full.preemptions);
            for p in &plan.pending {
                prop_assert_eq!(Some(p), full.pending_info(&p.job), "{} waits differently", p.job);
            }
        }
    }
}
