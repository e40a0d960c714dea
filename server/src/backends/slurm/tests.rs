//! The translation to and from Slurm's text, on lines Slurm 22.05 printed.

use super::*;

const NODE: &str = "NodeName=n1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=3 CPUEfctv=16 CPUTot=16 CPULoad=2.29 AvailableFeatures=a100,spot ActiveFeatures=a100,spot Gres=gpu:a100:4 GresDrain=N/A GresUsed=gpu:a100:2(IDX:0-1) NodeAddr=127.0.0.1 NodeHostName=localhost Version=22.05.8 OS=Linux 6.18.44-fc-v1252 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=64000 AllocMem=2048 FreeMem=5641 Sockets=16 Boards=1 State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=cpu,gpu  BootTime=2026-12-05T09:03:09 CfgTRES=cpu=16,mem=62.50G,billing=16 AllocTRES=cpu=3,mem=2G";

fn spec() -> StartSpec {
    StartSpec {
        run: RunId { job: "j-1".into(), run: 2 },
        entrypoint: "echo 'hi there'; exit 3".into(),
        working_dir: None,
        env_vars: [("GREETING".to_string(), "it's".to_string())].into_iter().collect(),
        runtime_env: Default::default(),
        resources: Resources::new([("cpu", Milli(1500)), ("memory_gb", Milli(500)), ("gpu", Milli::units(1))]),
        timeout_s: 61,
        node: "hpc:n1".into(),
        flavors: Vec::new(),
        selector_labels: [("feature.a100".to_string(), "true".to_string()), ("partition".to_string(), "in(gpu,cpu)".to_string())].into_iter().collect(),
        metadata: BTreeMap::new(),
        packages: Vec::new(),
    }
}

#[test]
fn a_node_line_becomes_a_node_with_labels_and_what_slurm_allocated() {
    let nodes = parse_nodes("hpc", NODE);
    assert_eq!(nodes.len(), 1);
    let n = &nodes[0];
    assert_eq!(&*n.node.id, "hpc:n1");
    assert_eq!(&*n.node.backend, "hpc");
    assert_eq!(n.slurm_name, "n1");
    assert_eq!(n.partitions, ["cpu", "gpu"]);
    assert_eq!(n.node.capacity, Resources::new([("cpu", Milli::units(16)), ("memory_gb", Milli(62_500)), ("gpu", Milli::units(4))]));
    assert_eq!(n.allocated, Resources::new([("cpu", Milli::units(3)), ("memory_gb", Milli::units(2)), ("gpu", Milli::units(2))]));
    let labels: Vec<(&str, &str)> = n.node.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        labels,
        [
            ("backend", "slurm"),
            ("feature.a100", "true"),
            ("feature.spot", "true"),
            ("gpu.type", "a100"),
            ("partition.cpu", "true"),
            ("partition.gpu", "true"),
            ("slurm.cluster", "hpc"),
            ("slurm.node", "n1")
        ]
    );
}

#[test]
fn drained_down_and_silent_nodes_are_known_but_not_usable() {
    for state in ["IDLE+DRAIN", "MIXED+DRAIN", "DOWN", "DOWN+NOT_RESPONDING", "IDLE*", "IDLE+POWERED_DOWN", "UNKNOWN", "FUTURE", "INVAL"] {
        let nodes = parse_nodes("hpc", &NODE.replace("State=MIXED", &format!("State={state}")));
        assert!(nodes.len() == 1 && !nodes[0].usable, "{state}");
    }
    for state in ["IDLE", "ALLOCATED", "MIXED", "IDLE+CLOUD"] {
        assert!(parse_nodes("hpc", &NODE.replace("State=MIXED", &format!("State={state}")))[0].usable, "{state}");
    }
    // A node in one partition also says it with `partition=`.
    let one = parse_nodes("hpc", &NODE.replace("Partitions=cpu,gpu", "Partitions=gpu"));
    assert_eq!(one[0].node.labels.get("partition").map(String::as_str), Some("gpu"));
}

#[test]
fn gres_lists_count_per_name_with_device_indices_left_out() {
    let (counts, types) = gres("gpu:a100:2(S:0-1),gpu:v100:1(IDX:0,2),nic:1");
    assert_eq!(counts.get("gpu"), Some(&3.0));
    assert_eq!(counts.get("nic"), Some(&1.0));
    assert_eq!(types, ["a100", "v100"]);
    assert!(gres("(null)").0.is_empty());
    assert!(gres("").0.is_empty());
    assert_eq!(gres("gpu:2").0.get("gpu"), Some(&2.0));
}

#[test]
fn slurm_end_states_map_to_berth_outcomes_with_reasons() {
    assert_eq!(outcome("COMPLETED", "None", "0:0", "n1"), Outcome::Exited(0));
    assert_eq!(outcome("FAILED", "NonZeroExitCode", "3:0", "n1"), Outcome::Exited(3));
    assert_eq!(outcome("FAILED", "JobLaunchFailure", "0:9", "n1"), Outcome::Signaled(9));
    assert_eq!(outcome("TIMEOUT", "TimeLimit", "0:15", "n1"), Outcome::TimedOut("Slurm's time limit passed (TIMEOUT on n1)".into()));
    let failed = |s: &str| match outcome(s, "None", "0:0", "n1") {
        Outcome::Failed(m) => m,
        other => panic!("{s}: {other:?}"),
    };
    assert!(failed("NODE_FAIL").contains("NODE_FAIL on n1"));
    assert!(failed("PREEMPTED").contains("preempted by Slurm"));
    assert!(failed("OUT_OF_MEMORY").contains("out of memory"));
    assert!(failed("CANCELLED").contains("not by Berth"));
    assert!(failed("BOOT_FAIL").contains("BOOT_FAIL"));
    assert!(failed("FAILED").contains("failed in Slurm"));
    // Garbage in, no panic.
    assert_eq!(exit_code("x:y"), (0, 0));
    assert_eq!(exit_code(""), (0, 0));
    // squeue's exit_code is the wait status.
    assert_eq!(exit_code("768"), (3, 0));
    assert_eq!(exit_code("0"), (0, 0));
    assert_eq!(exit_code("9"), (0, 9));
    assert_eq!(outcome("FAILED", "NonZeroExitCode", "768", "n1"), Outcome::Exited(3));
    assert_eq!(outcome("CANCELLED", "None", "15", "n1"), Outcome::Failed("cancelled in Slurm, not by Berth".into()));
}

#[test]
fn an_ended_row_carries_its_wait_status() {
    let rows = parse_rows("3|FAILED|NonZeroExitCode|n1|cpu=1,mem=100M,node=1|j-1-r1|768|\n4|RUNNING|None|n1|cpu=1,mem=100M,node=1|j-2-r1|0|\n");
    assert_eq!((rows[0].exit.as_str(), rows[1].exit.as_str()), ("768", "0"));
    // An older row without the column: nothing known, Berth asks scontrol.
    assert_eq!(parse_rows("3|FAILED|None|n1|cpu=1|j-1-r1|\n")[0].exit, "");
}

#[test]
fn phases_tell_waiting_holding_and_ended_jobs_apart() {
    assert_eq!(phase("PENDING"), Phase::Waiting);
    assert_eq!(phase("REQUEUED"), Phase::Waiting);
    assert_eq!(phase("RUNNING"), Phase::Holding);
    assert_eq!(phase("COMPLETING"), Phase::Holding);
    assert_eq!(phase("OUT_OF_MEMORY"), Phase::Ended("OUT_OF_MEMORY".into()));
}

#[test]
fn status_rows_carry_state_node_and_allocation() {
    let rows = parse_rows("3|FAILED|NonZeroExitCode|n1|cpu=2,mem=200M,node=1,billing=2|j-1-r1|\n2|RUNNING|None|n1|cpu=1,mem=1.5G,node=1|j-2-r1|\ngarbage\n");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].id, "3");
    assert_eq!(rows[0].state, "FAILED");
    assert_eq!(rows[0].alloc, Resources::new([("cpu", Milli::units(2)), ("memory_gb", Milli(195))]));
    assert_eq!(rows[1].alloc, Resources::new([("cpu", Milli::units(1)), ("memory_gb", Milli(1500))]));
    assert_eq!(rows[1].name, "j-2-r1");
}

#[test]
fn a_run_becomes_a_batch_script_and_sbatch_options() {
    let s = spec();
    let text = script(&s).unwrap();
    assert!(text.starts_with("#!/bin/sh\n"), "{text}");
    assert!(text.contains("export GREETING='it'\\''s'\n"), "{text}");
    assert!(text.contains("export BERTH_JOB_ID='j-1'\nexport BERTH_RUN='2'\n"), "{text}");
    assert!(text.ends_with("exec /bin/sh -c 'echo '\\''hi there'\\''; exit 3'\n"), "{text}");
    let (partitions, features) = selection(&s.selector_labels);
    assert_eq!((partitions.as_slice(), features.as_slice()), (&["cpu".to_string(), "gpu".to_string()][..], &["a100".to_string()][..]));
    let args = sbatch_args(&s, "n1", &partitions, &features, Path::new("/r/j-1-r2"), Path::new("/w"));
    for want in [
        "--job-name=j-1-r2",
        "--comment=berth-job:j-1",
        "--nodelist=n1",
        "--partition=cpu,gpu",
        "--constraint=a100",
        "--cpus-per-task=2",
        "--mem=512M",
        "--gres=gpu:1",
        "--time=2",
        "--no-requeue",
        "--chdir=/w",
        "--output=/r/j-1-r2/stdout",
        "--error=/r/j-1-r2/stderr",
    ] {
        assert!(args.iter().any(|a| a == want), "{want} missing from {args:?}");
    }
    // A variable name no shell can set is refused, not passed on.
    let mut bad = spec();
    bad.env_vars.insert("A-B".into(), "x".into());
    assert!(script(&bad).unwrap_err().contains("A-B"));
}

#[test]
fn sbatch_ids_and_key_values_are_read_defensively() {
    assert_eq!(parsable_id("42\n").as_deref(), Some("42"));
    assert_eq!(parsable_id("42;berth").as_deref(), Some("42"));
    assert_eq!(parsable_id("Submitted batch job 42"), None);
    assert_eq!(parsable_id(""), None);
    let kv = key_values("JobId=7 JobName=a-r1 Reason=maint [root@now] ExitCode=3:0 Command=/x y=z JobName=other");
    assert_eq!(kv["JobName"], "a-r1");
    assert_eq!(kv["Reason"], "maint [root@now]");
    assert_eq!(kv["ExitCode"], "3:0");
    assert_eq!(megabytes("62.50G"), Some(64000.0));
    assert_eq!(megabytes("-1M"), None);
    assert_eq!(megabytes(""), None);
}

#[test]
fn outside_work_is_slurms_allocation_minus_berths_jobs_including_those_ended_since_the_read() {
    let listed = parse_nodes("hpc", NODE).remove(0); // 3 CPUs, 2 GB, 2 GPUs allocated
    let read = Instant::now();
    let mine: (Name, Resources) = ("hpc:n1".into(), Resources::new([("cpu", Milli::units(1)), ("memory_gb", Milli::units(1)), ("gpu", Milli::units(1))]));
    let elsewhere: (Name, Resources) = ("hpc:n2".into(), Resources::units(&[("cpu", 2)]));
    let held = [mine.clone(), elsewhere];
    assert_eq!(outside(&listed, Some(read), held.iter(), &[]), Resources::new([("cpu", Milli::units(2)), ("memory_gb", Milli::units(1)), ("gpu", Milli::units(1))]));
    // A Berth job that ended after the read is still in Slurm's figures: not outside.
    let ended = [Ended { at: read + Duration::from_millis(1), held: mine.clone() }];
    assert_eq!(outside(&listed, Some(read), held.iter(), &ended), Resources::units(&[("cpu", 1)]));
    // One that ended before the read is not in them any more.
    let old = [Ended { at: read - Duration::from_millis(1), held: mine }];
    assert_eq!(outside(&listed, Some(read), held.iter(), &old), Resources::new([("cpu", Milli::units(2)), ("memory_gb", Milli::units(1)), ("gpu", Milli::units(1))]));
    // Never below zero.
    let big: (Name, Resources) = ("hpc:n1".into(), Resources::units(&[("cpu", 10)]));
    assert_eq!(outside(&listed, Some(read), [big].iter(), &[]).get("cpu"), Milli::ZERO);
}

/// Task `index` of stage `s-1` (as `berth jobs submit --array` makes them).
fn task(job: &str, index: u32) -> StartSpec {
    let mut t = spec();
    t.run = RunId { job: job.into(), run: 1 };
    t.metadata.insert("stage".into(), "s-1".into());
    for k in ["BERTH_ARRAY_INDEX", "SLURM_ARRAY_TASK_ID"] {
        t.env_vars.insert(k.into(), index.to_string());
    }
    t.env_vars.insert("SLURM_ARRAY_TASK_COUNT".into(), "9".into());
    t
}

#[test]
fn tasks_of_one_array_alike_but_for_their_index_share_a_batch_and_other_runs_go_alone() {
    let keys = |b: &[Vec<StartSpec>]| -> Vec<Vec<String>> { b.iter().map(|v| v.iter().map(|s| s.run.job.to_string()).collect()).collect() };
    let mut other_node = task("d", 4);
    other_node.node = "hpc:n2".into();
    let mut other_stage = task("e", 5);
    other_stage.metadata.insert("stage".into(), "s-2".into());
    let mut other_env = task("f", 6);
    other_env.env_vars.insert("LR".into(), "0.1".into());
    let mut retried_index = task("g", 1);
    retried_index.run.run = 2;
    let lone = spec(); // no stage, no index
    let specs = vec![task("a", 1), lone, task("b", 2), other_node, other_stage, other_env, retried_index, task("c", 3)];
    assert_eq!(keys(&batches(specs)), [vec!["a", "b", "c"], vec!["j-1"], vec!["d"], vec!["e"], vec!["f"], vec!["g"]]);
    // A stage job without an index is not an array task.
    let mut plain = task("h", 0);
    plain.env_vars.remove("BERTH_ARRAY_INDEX");
    assert_eq!(keys(&batches(vec![plain, task("i", 1)])), [vec!["h"], vec!["i"]]);
}

#[test]
fn an_array_lists_its_indices_as_ranges_and_dispatches_each_task_to_its_run() {
    assert_eq!(index_list(&[3, 0, 1, 2, 7, 9, 10]), "0-3,7,9-10");
    assert_eq!(index_list(&[5]), "5");
    let tasks = [Task { index: 4, dir: "/r/a-r1".into(), work: "/r/a-r1/work".into() }, Task { index: 7, dir: "/r/b-r2".into(), work: "/shared/it's".into() }];
    let text = dispatcher("array-a-r1", &tasks);
    assert!(text.starts_with("#!/bin/sh\n"), "{text}");
    assert!(text.contains("4) { echo \"$SLURM_JOB_ID\" > '/r/a-r1/slurm_raw_id'; } 2>/dev/null; cd '/r/a-r1/work' || exit 1; exec /bin/sh '/r/a-r1/job.sh' ;;\n"), "{text}");
    assert!(text.contains("7) { echo \"$SLURM_JOB_ID\" > '/r/b-r2/slurm_raw_id'; } 2>/dev/null; cd '/shared/it'\\''s' || exit 1; exec /bin/sh '/r/b-r2/job.sh' ;;\n"), "{text}");
    assert!(text.ends_with("exit 1\n"), "an index with no run fails: {text}");
    // A task's own script exports Berth's index as a lone run of it would.
    let t = script(&task("a", 4)).unwrap();
    assert!(t.contains("export BERTH_ARRAY_INDEX='4'\n") && t.contains("export SLURM_ARRAY_TASK_COUNT='9'\n"), "{t}");
}

#[test]
fn array_tasks_are_watched_as_array_id_and_index() {
    assert_eq!(job_ref("42_3\n").as_deref(), Some("42_3"));
    assert_eq!(job_ref("42").as_deref(), Some("42"));
    for bad in ["42_", "_3", "42_[3-5]", "42_3_1", "x", ""] {
        assert_eq!(job_ref(bad), None, "{bad}");
    }
    let rows = parse_rows("7_3|RUNNING|None|n1|cpu=1,mem=100M,node=1,billing=1|array-j-1-r1|\n7_4|PENDING|Resources||cpu=1,mem=100M,node=1,billing=1|array-j-1-r1|\n");
    assert_eq!((rows[0].id.as_str(), rows[1].id.as_str(), rows[1].state.as_str()), ("7_3", "7_4", "PENDING"));
    // A run's directory says which array and index it was submitted as.
    let dir = std::env::temp_dir().join(format!("berth-slurm-mark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("slurm_array"), "array-j-1-r1 3\n").unwrap();
    assert_eq!(read_mark(&dir), Some(("array-j-1-r1".to_string(), 3)));
    std::os::unix::fs::symlink("/nowhere/3.stdout", dir.join("stdout")).unwrap();
    clear_mark(&dir).unwrap();
    assert!(read_mark(&dir).is_none() && std::fs::symlink_metadata(dir.join("stdout")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
