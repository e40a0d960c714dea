//! Workflows on top of single jobs: dependencies named at submit (resolved to job ids
//! here), holding and releasing a pending job, and cancelling what is left of a stage (an
//! array). The loop decides when a dependent may run (`admission::gate`).

use app::jobs::{DependencyKind, Job, JobRequest, StageStatus};

use super::{Runtime, RuntimeError};
use crate::admission::Cmd;
use crate::services::auth::Caller;
use crate::store::auth::AuditRecord;
use crate::store::jobs::JobStoreError;

/// Most dependencies one job may name (after stages are expanded to their jobs).
const MAX_DEPENDENCIES: usize = 10_000;

impl Runtime {
    /// Replaces each dependency of `req` by job ids: a job's id stays, a submission id
    /// becomes its job's id, a stage's id becomes the ids of its jobs. Who holds the job is
    /// set here, from `hold`, never from the request. An unknown name is refused, naming
    /// its field (`after_ok[1]: …`).
    pub(super) async fn resolve_workflow(&self, req: &mut JobRequest, caller: &Caller) -> Result<(), RuntimeError> {
        req.held_by = req.hold.then(|| caller.user.clone());
        for kind in [DependencyKind::AfterOk, DependencyKind::AfterAny, DependencyKind::AfterNotOk] {
            let named = std::mem::take(field(req, kind));
            let mut ids: Vec<String> = Vec::with_capacity(named.len());
            for (i, reference) in named.iter().enumerate() {
                ids.extend(self.job_ids_of(reference).await.map_err(|e| match e {
                    RuntimeError::Invalid(m) => RuntimeError::Invalid(format!("{}[{i}]: {m}", kind.field())),
                    other => other,
                })?);
            }
            ids.dedup();
            *field(req, kind) = ids;
        }
        let count = req.dependencies().count();
        if count > MAX_DEPENDENCIES {
            return Err(RuntimeError::Invalid(format!("after_ok: at most {MAX_DEPENDENCIES} dependencies in all (stages count their jobs), got {count}")));
        }
        Ok(())
    }

    /// The jobs `reference` names: one job (by id or submission id), or a stage's jobs.
    async fn job_ids_of(&self, reference: &str) -> Result<Vec<String>, RuntimeError> {
        match self.store.find(reference, false).await {
            Ok(row) => return Ok(vec![row.id]),
            Err(JobStoreError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
        }
        match self.store.stage(reference).await? {
            Some((_, jobs)) => Ok(jobs.into_iter().map(|j| j.id).collect()),
            None => Err(RuntimeError::Invalid(format!("no job or stage `{reference}`"))),
        }
    }

    /// Holds a pending job (`hold`) or releases it. Only its submitter or an admin may, as
    /// for cancel.
    pub async fn hold(&self, reference: &str, hold: bool, caller: &Caller) -> Result<Job, RuntimeError> {
        let row = self.store.find(reference, false).await?;
        let what = if hold { "holding a job" } else { "releasing a job" };
        caller.require_owner(&row.submitter, what)?;
        let (id, by) = (row.id.clone(), caller.user.clone());
        let job = match self.call(|reply| Cmd::Hold { id: id.clone(), hold, by, reply }).await {
            Err(RuntimeError::NotLive(_)) => Err(self.not_live(&id).await),
            other => other,
        }?;
        let (action, verb) = if hold { ("job.hold", "held") } else { ("job.release", "released") };
        let detail = format!("{verb} {} ({}) of {}", job.name, job.id, row.submitter);
        self.audit(AuditRecord { actor: &caller.user, action, target: &job.id, detail }).await;
        Ok(job)
    }

    /// Cancels every unfinished job of a stage (an array); the status after. Only its
    /// submitter or an admin may.
    pub async fn cancel_stage(&self, id: &str, caller: &Caller) -> Result<StageStatus, RuntimeError> {
        let (status, jobs) = self.store.stage(id).await?.ok_or_else(|| RuntimeError::StageNotFound(id.to_string()))?;
        caller.require_owner(&status.submitter, "cancelling a stage")?;
        for job in jobs.iter().filter(|j| !j.state.is_terminal()) {
            let by = caller.user.clone();
            match self.call(|reply| Cmd::Cancel { id: job.id.clone(), by, reply }).await {
                Ok(_) | Err(RuntimeError::NotLive(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let detail = format!("cancelled the unfinished jobs of stage {} ({id})", status.name);
        self.audit(AuditRecord { actor: &caller.user, action: "stage.cancel", target: id, detail }).await;
        self.stage(id).await
    }
}

fn field(req: &mut JobRequest, kind: DependencyKind) -> &mut Vec<String> {
    match kind {
        DependencyKind::AfterOk => &mut req.after_ok,
        DependencyKind::AfterAny => &mut req.after_any,
        DependencyKind::AfterNotOk => &mut req.after_not_ok,
    }
}
