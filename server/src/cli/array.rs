//! `berth jobs submit --array RANGE[%N]`: an array of tasks as one stage (so its
//! counts, results and page come with it), each task with its index in the environment as
//! Berth and Slurm name it.

use anyhow::{bail, Context, Result};
use app::jobs::{JobRequest, Parallelism, StageRequest};

/// Most tasks in one array (a stage's limit).
const MAX_TASKS: usize = 10_000;

/// The indices of `spec` (`0-99`, `1,3,5-9`, `0-98:2`) and its limit of tasks running at
/// once (`%N`; 0: none).
pub fn parse_array(spec: &str) -> Result<(Vec<u32>, u32)> {
    let (list, cap) = match spec.split_once('%') {
        Some((list, cap)) => {
            let cap: u32 = cap.trim().parse().with_context(|| format!("--array: `%{cap}` is not a number of tasks"))?;
            if cap == 0 {
                bail!("--array: `%0` would run no task; give at least %1");
            }
            (list, cap)
        }
        None => (spec, 0),
    };
    let number = |s: &str| -> Result<u32> { s.trim().parse().with_context(|| format!("--array: `{s}` is not an index (0 or more)")) };
    let mut indices = Vec::new();
    for item in list.split(',') {
        let (range, step) = match item.split_once(':') {
            Some((r, s)) => (r, number(s)?),
            None => (item, 1),
        };
        if step == 0 {
            bail!("--array: `{item}` has a step of 0");
        }
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(range)?, number(range)?),
        };
        if first > last {
            bail!("--array: `{item}` ends before it starts");
        }
        if (last - first) as usize / step as usize + indices.len() >= MAX_TASKS {
            bail!("--array: at most {MAX_TASKS} tasks");
        }
        indices.extend((first..=last).step_by(step as usize));
    }
    indices.sort_unstable();
    indices.dedup();
    Ok((indices, cap))
}

/// The stage that runs `job` once per index of `spec`.
pub fn array_stage(job: &JobRequest, spec: &str) -> Result<StageRequest> {
    if job.submission_id.is_some() {
        bail!("--submission-id: not taken with --array (the tasks are named by the array's stage)");
    }
    let (indices, cap) = parse_array(spec)?;
    let name = job.name.clone().unwrap_or_else(|| job.entrypoint.split_whitespace().next().unwrap_or("array").to_string());
    let (min, max, count) = (indices[0], indices[indices.len() - 1], indices.len());
    let jobs = indices
        .iter()
        .map(|i| {
            let mut task = job.clone();
            task.name = Some(format!("{name}[{i}]"));
            let env = &mut task.runtime_env.env_vars;
            for (k, v) in [("BERTH_ARRAY_INDEX", i), ("SLURM_ARRAY_TASK_ID", i), ("SLURM_ARRAY_TASK_MIN", &min), ("SLURM_ARRAY_TASK_MAX", &max)] {
                env.insert(k.into(), v.to_string());
            }
            env.insert("SLURM_ARRAY_TASK_COUNT".into(), count.to_string());
            task
        })
        .collect();
    Ok(StageRequest { name, jobs, parallelism: Parallelism { max_concurrent: cap, ..Default::default() } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_lists_steps_and_caps() {
        assert_eq!(parse_array("0-3").unwrap(), (vec![0, 1, 2, 3], 0));
        assert_eq!(parse_array("1,3,5-7%2").unwrap(), (vec![1, 3, 5, 6, 7], 2));
        assert_eq!(parse_array("0-6:3,3").unwrap(), (vec![0, 3, 6], 0));
        for (bad, says) in [("a-3", "`a` is not an index"), ("3-1", "ends before it starts"), ("0-9%0", "%0"), ("0-9%x", "`%x`"), ("0-99999", "at most"), ("1:0", "step of 0"), ("-1", "is not an index")] {
            let e = parse_array(bad).unwrap_err().to_string();
            assert!(e.starts_with("--array:") && e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn each_task_gets_its_index() {
        let job = JobRequest { entrypoint: "python task.py".into(), ..Default::default() };
        let stage = array_stage(&job, "2-4%2").unwrap();
        assert_eq!((stage.name.as_str(), stage.jobs.len(), stage.parallelism.max_concurrent), ("python", 3, 2));
        let env = &stage.jobs[1].runtime_env.env_vars;
        assert_eq!((env["BERTH_ARRAY_INDEX"].as_str(), env["SLURM_ARRAY_TASK_ID"].as_str(), env["SLURM_ARRAY_TASK_COUNT"].as_str()), ("3", "3", "3"));
        assert_eq!(stage.jobs[2].name.as_deref(), Some("python[4]"));
    }
}
