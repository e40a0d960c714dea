//! What the jobs service reads for its callers: a job (by reference, also as Ray's job API
//! shows it), pages of jobs, logs, the live queue, cohort and node views, events, resource
//! history.

use super::*;

impl Runtime {
    /// One job, by its id or submission id, with its history and, while it waits, its
    /// position and reason.
    pub async fn job(&self, reference: &str) -> Result<Job, RuntimeError> {
        self.detail(self.store.find(reference, false).await?).await
    }

    /// [`Runtime::job`] as Ray's API sees jobs: one it deleted is not found.
    pub async fn ray_job(&self, reference: &str) -> Result<Job, RuntimeError> {
        self.detail(self.store.find(reference, true).await?).await
    }

    /// A stored job with its history and, while it waits, its position and reason.
    async fn detail(&self, row: JobRow) -> Result<Job, RuntimeError> {
        let id = row.id.clone();
        let mut job = row.to_job();
        if job.state == JobState::Pending {
            let key = id.to_string();
            if let Some(wait) = self.ask(move |s| s.waiting.get(key.as_str())).await? {
                wait.tell(&mut job);
            }
        }
        job.dependents = self.store.dependents(&id).await?;
        let filter = EventFilter { job_id: Some(id), ..Default::default() };
        job.history = self.store.events(&filter, None, app::api::MAX_PAGE).await?.0;
        Ok(job)
    }

    /// A page of jobs, newest first.
    pub async fn jobs(&self, filter: &JobFilter, cursor: Option<i64>, limit: i64) -> Result<JobPage, RuntimeError> {
        let mut page = self.store.list(filter, cursor, limit).await?;
        let ids: Vec<String> = page.jobs.iter().filter(|j| j.state == JobState::Pending).map(|j| j.id.clone()).collect();
        if !ids.is_empty() {
            let infos = self.ask(move |s| ids.iter().map(|id| s.waiting.get(id.as_str())).collect::<Vec<_>>()).await?;
            let mut infos = infos.into_iter();
            for job in page.jobs.iter_mut().filter(|j| j.state == JobState::Pending) {
                if let Some(Some(wait)) = infos.next() {
                    wait.tell(job);
                }
            }
        }
        Ok(page)
    }

    /// The log of a job's latest run (named by its id or submission id).
    pub async fn logs(&self, reference: &str, stream: Stream, tail: Option<u64>) -> Result<(Vec<u8>, JobState), RuntimeError> {
        self.read_log(reference, stream, tail).await.map(|r| (r.bytes, r.state))
    }

    /// [`Runtime::logs`], saying which run the log is of.
    pub async fn read_log(&self, reference: &str, stream: Stream, tail: Option<u64>) -> Result<LogRead, RuntimeError> {
        let row = self.store.find(reference, false).await?;
        if row.runs == 0 {
            return Ok(LogRead { bytes: Vec::new(), state: row.state, run: 0 });
        }
        let backend_name = row.backend.clone().or_else(|| self.last_backend(&row)).unwrap_or_else(|| "local".into());
        let Some(backend) = self.backends.get(&backend_name) else {
            return Err(RuntimeError::Backend(format!("backend `{backend_name}` is not configured")));
        };
        let run = RunId { job: row.id.as_str().into(), run: row.runs };
        let bytes = backend.logs(run, stream, tail).await.map_err(|e| RuntimeError::Backend(e.to_string()))?;
        Ok(LogRead { bytes, state: row.state, run: row.runs })
    }

    /// A finished job keeps its backend column; a requeued one lost it — fall back to the
    /// only backend when there is one.
    fn last_backend(&self, _row: &JobRow) -> Option<String> {
        let mut it = self.backends.iter();
        let first = it.next()?;
        it.next().is_none().then(|| first.name().to_string())
    }

    /// Every queue's usage and counts; with `name`, that queue's waiting and running jobs too.
    pub async fn queues(&self, name: Option<String>) -> Result<Vec<QueueView>, RuntimeError> {
        let want = name.clone();
        let views = self.ask(move |s| queue_views(s, want.as_deref())).await?;
        if let Some(n) = name {
            if views.is_empty() {
                return Err(RuntimeError::Invalid(format!("queue: no queue named `{n}` in the active config")));
            }
        }
        Ok(views)
    }

    /// Every live job (waiting, admitted, running), or those of queue `name`; waiting ones
    /// with their position and reason (see `views::live_jobs` for the order).
    pub async fn jobs_live(&self, name: Option<String>) -> Result<Vec<Job>, RuntimeError> {
        let want = name.clone();
        let (known, jobs) = self
            .ask(move |s| {
                let known = want.as_deref().is_none_or(|n| s.compiled.queues.iter().any(|q| *q.name == *n));
                (known, live_jobs(s, want.as_deref()))
            })
            .await?;
        match (known, name) {
            (false, Some(n)) => Err(RuntimeError::Invalid(format!("queue: no queue named `{n}` in the active config"))),
            _ => Ok(jobs),
        }
    }

    /// Every cohort with its members' usage, borrowing, lending and shares; or the one named.
    pub async fn cohorts(&self, name: Option<String>) -> Result<Vec<CohortView>, RuntimeError> {
        let want = name.clone();
        let views = self.ask(move |s| cohort_views(s, want.as_deref())).await?;
        if let Some(n) = name {
            if views.is_empty() {
                return Err(RuntimeError::Invalid(format!("cohort: no cohort named `{n}` in the active config")));
            }
        }
        Ok(views)
    }

    /// Every node with its free capacity, the flavors that select it, and what its backend
    /// reports in use there.
    pub async fn nodes(&self) -> Result<Vec<NodeView>, RuntimeError> {
        let reported: HashMap<String, backend::Reported> =
            self.backends.iter().filter_map(|b| Some((b.name().to_string(), b.reported()?))).collect();
        let amounts = |r: &engine::Resources| r.iter().map(|(k, v)| (k.to_string(), v.as_f64())).collect::<BTreeMap<_, _>>();
        self.ask(move |s| {
            s.nodes
                .iter()
                .map(|n| NodeView {
                    id: n.id.to_string(),
                    backend: n.backend.to_string(),
                    labels: n.labels.clone(),
                    capacity: amounts(&n.capacity),
                    free: admission::free_on(s, n).iter().map(|(k, v)| (k.to_string(), v.as_f64())).collect(),
                    used_outside: amounts(&n.used_outside),
                    reported: reported.get(&*n.backend).and_then(|r| {
                        Some(ReportedUse { at: store::time_of(r.at_us), used: amounts(r.used.get(&n.id)?) })
                    }),
                    flavors: s
                        .compiled
                        .flavors
                        .iter()
                        .filter(|f| app::config::selector::matches(Some(&f.selector), &n.labels))
                        .map(|f| f.name.to_string())
                        .collect(),
                })
                .collect()
        })
        .await
    }

    /// A page of events in the filter's order, with the cursor of the next page if any.
    pub async fn events(&self, filter: &EventFilter, cursor: Option<i64>, limit: i64) -> Result<EventPage, RuntimeError> {
        let (events, more) = self.store.events(filter, cursor, limit).await?;
        let next_cursor = more.then(|| events.last().map(|e| e.seq.to_string())).flatten();
        Ok(EventPage { events, next_cursor })
    }

    /// Resource history, downsampled.
    /// Downsampled resource history; a cohort filter is its members in the active config
    /// (none: nothing matches).
    pub async fn history(&self, q: &HistoryQuery) -> Result<Vec<Sample>, RuntimeError> {
        let Some(cohort) = q.cohort.clone() else { return Ok(self.store.history(q).await?) };
        let members: Vec<String> = self
            .ask(move |s| s.compiled.cohorts().find(|(n, _, _)| ***n == *cohort).map(|(_, m, _)| m.iter().map(|q| q.to_string()).collect()))
            .await?
            .unwrap_or_default();
        if members.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.store.history(&HistoryQuery { queues: members, ..q.clone() }).await?)
    }

    /// The number of unfinished jobs the loop holds (for readiness and tests).
    pub async fn live_jobs(&self) -> Result<usize, RuntimeError> {
        self.ask(|s| s.jobs.len()).await
    }
}
