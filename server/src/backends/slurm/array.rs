//! Slurm job arrays for Berth arrays (with `--slurm-arrays`). The tasks of one Berth array (a stage whose jobs carry
//! `BERTH_ARRAY_INDEX`, see `berth jobs submit --array`) that the loop starts in one cycle,
//! alike in all but their index (command, environment, request, time limit, node, flavor),
//! go to Slurm as one `sbatch --array=<their indices>`. Each task stays its own Berth run,
//! with its own directory and script (`job.sh`, as for any run), watched, cancelled and
//! adopted as Slurm's `ARRAYID_INDEX`.
//!
//! The array's directory `run_dir/array-{first run}/` holds Slurm's output files
//! (`%a.stdout`, `%a.stderr`) and a dispatcher script: per `SLURM_ARRAY_TASK_ID` it writes
//! the task's own Slurm job id into its run's directory (`slurm_raw_id`: the completion
//! record knows a task only by it), enters the run's working directory and runs its
//! `job.sh`, which exports Berth's index and array variables as a lone run of the task
//! would. Each run's `stdout` and `stderr` link to its task's files, and `slurm_array` in
//! its directory names the array and the index before `sbatch` runs, so recovery finds a
//! task whose id was never written down.

use super::*;

use crate::backends::Report;

/// The environment variables in which the tasks of one array differ (Berth's index).
const INDEX_VARS: [&str; 2] = ["BERTH_ARRAY_INDEX", "SLURM_ARRAY_TASK_ID"];

/// A run's index when it is a task of a Berth array.
pub(super) fn array_index(spec: &StartSpec) -> Option<u32> {
    spec.metadata.get("stage")?;
    spec.env_vars.get("BERTH_ARRAY_INDEX")?.trim().parse().ok()
}

/// Whether two tasks may share one Slurm job array: the same stage, command, environment
/// but for the index, request, time limit, node and flavor.
fn alike(a: &StartSpec, b: &StartSpec) -> bool {
    fn env(s: &StartSpec) -> Vec<(&String, &String)> {
        s.env_vars.iter().filter(|(k, _)| !INDEX_VARS.contains(&k.as_str())).collect()
    }
    a.metadata.get("stage") == b.metadata.get("stage")
        && a.entrypoint == b.entrypoint
        && a.working_dir == b.working_dir
        && env(a) == env(b)
        && a.runtime_env == b.runtime_env
        && a.resources == b.resources
        && a.timeout_s == b.timeout_s
        && a.node == b.node
        && a.selector_labels == b.selector_labels
}

/// A cycle's starts as `sbatch` batches: tasks of one array that are alike together (each
/// index once), every other run alone; batches in the order of their first run.
pub(super) fn batches(specs: Vec<StartSpec>) -> Vec<Vec<StartSpec>> {
    let mut out: Vec<Vec<StartSpec>> = Vec::new();
    for spec in specs {
        let joins = array_index(&spec).and_then(|i| {
            out.iter().position(|b| array_index(&b[0]).is_some() && alike(&b[0], &spec) && b.iter().all(|t| array_index(t) != Some(i)))
        });
        match joins {
            Some(at) => out[at].push(spec),
            None => out.push(vec![spec]),
        }
    }
    out
}

/// Slurm's `--array` list of indices: runs of consecutive ones as ranges (`0-15,17`).
pub(super) fn index_list(indices: &[u32]) -> String {
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { sorted[i].to_string() } else { format!("{}-{}", sorted[i], sorted[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// One task of an array to write: its index, run directory and working directory.
pub(super) struct Task {
    pub index: u32,
    pub dir: PathBuf,
    pub work: PathBuf,
}

/// The array's batch script: for its task, record the task's own job id, enter the run's
/// working directory and run the run's own script.
pub(super) fn dispatcher(name: &str, tasks: &[Task]) -> String {
    let mut s = format!("#!/bin/sh\n# Berth array {name}: each task is one Berth run\ncase \"$SLURM_ARRAY_TASK_ID\" in\n");
    for t in tasks {
        let raw = quote(&t.dir.join("slurm_raw_id").display().to_string());
        let (work, script) = (quote(&t.work.display().to_string()), quote(&t.dir.join("job.sh").display().to_string()));
        s.push_str(&format!("{}) {{ echo \"$SLURM_JOB_ID\" > {raw}; }} 2>/dev/null; cd {work} || exit 1; exec /bin/sh {script} ;;\n", t.index));
    }
    s.push_str("esac\necho \"Berth has no run for array task $SLURM_ARRAY_TASK_ID\" >&2\nexit 1\n");
    s
}

/// The array a run was submitted in and its index (`slurm_array` in its directory).
pub(super) fn read_mark(dir: &Path) -> Option<(String, u32)> {
    let text = std::fs::read_to_string(dir.join("slurm_array")).ok()?;
    let (name, index) = text.trim().split_once(' ')?;
    Some((name.to_string(), index.parse().ok()?))
}

/// Marks a run as task `index` of array `name`, its logs being the task's in `array_dir`.
fn mark(dir: &Path, name: &str, index: u32, array_dir: &Path) -> std::io::Result<()> {
    clear_mark(dir)?;
    std::fs::write(dir.join("slurm_array"), format!("{name} {index}\n"))?;
    std::os::unix::fs::symlink(array_dir.join(format!("{index}.stdout")), dir.join("stdout"))?;
    std::os::unix::fs::symlink(array_dir.join(format!("{index}.stderr")), dir.join("stderr"))
}

/// Removes what an earlier start as an array task left in a run's directory, before the
/// run is submitted on its own.
pub(super) fn clear_mark(dir: &Path) -> std::io::Result<()> {
    for f in ["slurm_array", "slurm_raw_id", "stdout", "stderr"] {
        let path = dir.join(f);
        let link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
        if link || (f.starts_with("slurm_") && path.exists()) {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

impl SlurmBackend {
    /// Starts a cycle's runs in [`batches`] (each run alone without `--slurm-arrays`),
    /// reporting each run's result as its batch is submitted.
    pub(super) async fn start_batches(&self, specs: Vec<StartSpec>, done: &Report) {
        let batches = if self.cfg.arrays { batches(specs) } else { specs.into_iter().map(|s| vec![s]).collect() };
        let mut down: Option<BackendError> = None;
        for batch in batches {
            let results = match &down {
                Some(e) => batch.iter().map(|s| (s.run.clone(), Err(e.clone()))).collect(),
                None => self.submit_batch(batch).await,
            };
            for (run, result) in results {
                if let Err(e @ BackendError::Unavailable(_)) = &result {
                    down = Some(e.clone());
                }
                if !done(run, result) {
                    return;
                }
            }
        }
    }

    /// One batch: tasks an earlier start submitted are watched again, the others go as one
    /// job array (two or more) or alone. An array Slurm refuses (an index above its
    /// `MaxArraySize`, …) is submitted task by task, each with its own answer.
    async fn submit_batch(&self, batch: Vec<StartSpec>) -> Vec<(RunId, Result<String, BackendError>)> {
        let mut results = Vec::with_capacity(batch.len());
        let mut fresh = Vec::with_capacity(batch.len());
        for spec in batch {
            match self.earlier_start(&spec).await {
                Ok(Some(id)) => results.push((spec.run.clone(), Ok(id))),
                Ok(None) => fresh.push(spec),
                Err(e) => results.push((spec.run.clone(), Err(e))),
            }
        }
        if fresh.len() >= 2 {
            match self.submit_array(&fresh).await {
                Ok(ids) => return results.into_iter().chain(fresh.iter().map(|s| s.run.clone()).zip(ids.into_iter().map(Ok))).collect(),
                Err(e @ BackendError::Unavailable(_)) => return results.into_iter().chain(fresh.iter().map(|s| (s.run.clone(), Err(e.clone())))).collect(),
                Err(BackendError::Failed(why)) => tracing::info!(backend = %self.cfg.name, error = %why, "Slurm refused a job array; submitting its tasks one by one"),
            }
        }
        for spec in fresh {
            results.push((spec.run.clone(), self.submit_fresh(spec).await));
        }
        results
    }

    /// Submits `tasks` (alike, two or more) as one job array; each task's `ARRAYID_INDEX`.
    async fn submit_array(&self, tasks: &[StartSpec]) -> Result<Vec<String>, BackendError> {
        let first = &tasks[0];
        let (node, partitions, features) = self.placement(first)?;
        let name = format!("array-{}", first.run.key());
        let array_dir = self.cfg.run_dir.join(&name);
        let mut written = Vec::with_capacity(tasks.len());
        for spec in tasks {
            let work = self.prepare_run(spec)?;
            let (index, dir) = (array_index(spec).unwrap_or_default(), self.run_dir(&spec.run));
            mark(&dir, &name, index, &array_dir).map_err(|e| BackendError::Failed(format!("cannot mark run {} as an array task: {e}", spec.run.key())))?;
            written.push(Task { index, dir, work });
        }
        let script = array_dir.join("job.sh");
        std::fs::create_dir_all(&array_dir)
            .and_then(|()| std::fs::write(&script, dispatcher(&name, &written)))
            .map_err(|e| BackendError::Failed(format!("cannot write the array's files under {}: {e}", array_dir.display())))?;
        let mut args = request_args(first, &node, &partitions, &features);
        let indices: Vec<u32> = written.iter().map(|t| t.index).collect();
        args.push(format!("--array={}", index_list(&indices)));
        args.push(format!("--job-name={name}"));
        args.push(format!("--comment=berth-stage:{}", first.metadata.get("stage").map(String::as_str).unwrap_or_default()));
        args.push(format!("--chdir={}", array_dir.display()));
        args.push(format!("--output={}", array_dir.join("%a.stdout").display()));
        args.push(format!("--error={}", array_dir.join("%a.stderr").display()));
        args.push(script.display().to_string());
        let out = self.run("sbatch", &args).await.map_err(|e| e.into_backend("Slurm refused the job array"))?;
        let array = parsable_id(&out).ok_or_else(|| BackendError::Failed(format!("sbatch printed no job id: {}", last_line(&out))))?;
        let _ = std::fs::write(array_dir.join("slurm_job_id"), format!("{array}\n"));
        let ids: Vec<String> = written.iter().map(|t| format!("{array}_{}", t.index)).collect();
        for ((spec, task), id) in tasks.iter().zip(&written).zip(&ids) {
            if let Err(e) = std::fs::write(task.dir.join("slurm_job_id"), format!("{id}\n")) {
                tracing::warn!(run = %spec.run.key(), error = %e, "cannot record the Slurm job id");
            }
            self.watch(id, &spec.run, &spec.resources);
        }
        Ok(ids)
    }

    /// The name of the Slurm job that runs `run`: its array's, or its own.
    pub(super) fn slurm_name(&self, run: &RunId) -> String {
        read_mark(&self.run_dir(run)).map_or_else(|| run.key(), |(name, _)| name)
    }

    /// The id under which the completion record knows job `id`: an array task's own job
    /// id, which the task wrote down as it began (`None`: it never began, or could not).
    pub(super) fn record_id(&self, id: &str, run: &RunId) -> Option<String> {
        if !id.contains('_') {
            return Some(id.to_string());
        }
        std::fs::read_to_string(self.run_dir(run).join("slurm_raw_id")).ok().and_then(|t| parsable_id(&t))
    }

    /// The job an earlier start of `run` submitted, for a run whose id was never written
    /// down: its array's task, or the job under its own name.
    pub(super) async fn find_earlier(&self, run: &RunId) -> Result<Option<String>, CliError> {
        match read_mark(&self.run_dir(run)) {
            Some((name, index)) => Ok(self.find_by_name(&name).await?.map(|array| format!("{array}_{index}"))),
            None => self.find_by_name(&run.key()).await,
        }
    }
}
