//! Wire types of accounting: usage by user, queue or label, and a queue's admissions.

use super::*;

/// What `GET /api/v1/usage` groups jobs by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageGroup {
    User,
    Queue,
    /// The value of one label (e.g. `team`); jobs without it are grouped as `(none)`.
    Label(String),
}

/// `GET /api/v1/usage`: jobs that ended in `[since, until)`, per group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    /// `user`, `queue` or `label:KEY`.
    pub by: String,
    pub rows: Vec<UsageRow>,
}

/// One group's use (see [`UsageReport`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    pub group: String,
    /// Jobs by final state.
    pub jobs: BTreeMap<String, u64>,
    /// Requested CPUs × run time, in hours (the last run, from its start to the job's end).
    pub cpu_hours: f64,
    pub gpu_hours: f64,
    pub memory_gb_hours: f64,
    /// Seconds from enqueue to (last) admission, of the jobs that were admitted.
    pub wait_p50_s: Option<f64>,
    pub wait_p95_s: Option<f64>,
    pub wait_max_s: Option<f64>,
    /// Runs started again other than by a retry: preemptions (and requeues after a backend
    /// lost a run).
    pub preemptions: u64,
}

impl UsageGroup {
    /// `user`, `queue` or `label:KEY`, as the API's `by` parameter takes it.
    pub fn parse(raw: &str) -> Result<UsageGroup, String> {
        match raw.trim() {
            "user" => Ok(UsageGroup::User),
            "queue" => Ok(UsageGroup::Queue),
            other => match other.strip_prefix("label:") {
                // What a job's label key may be (see `request`), so no job is left out.
                Some(key) if key.contains('\0') || key.len() > crate::request::MAX_NAME => {
                    Err(format!("by: the label key must have no NUL character and at most {} bytes", crate::request::MAX_NAME))
                }
                Some(key) if !key.is_empty() => Ok(UsageGroup::Label(key.to_string())),
                _ => Err(format!("by: `{raw}` is not user, queue or label:KEY")),
            },
        }
    }

    /// The inverse of [`UsageGroup::parse`].
    pub fn name(&self) -> String {
        match self {
            UsageGroup::User => "user".into(),
            UsageGroup::Queue => "queue".into(),
            UsageGroup::Label(key) => format!("label:{key}"),
        }
    }
}

impl UsageReport {
    /// One CSV line per group under a header; a job-state column per final state.
    pub fn to_csv(&self) -> String {
        let states = [JobState::Succeeded, JobState::Failed, JobState::TimedOut, JobState::Cancelled, JobState::Rejected];
        let mut out = String::from("group");
        for s in states {
            out.push_str(&format!(",{}", s.as_str()));
        }
        out.push_str(",cpu_hours,gpu_hours,memory_gb_hours,wait_p50_s,wait_p95_s,wait_max_s,preemptions\n");
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        for r in &self.rows {
            out.push_str(&csv_field(&r.group));
            for s in states {
                out.push_str(&format!(",{}", r.jobs.get(s.as_str()).copied().unwrap_or(0)));
            }
            out.push_str(&format!(
                ",{:.4},{:.4},{:.4},{},{},{},{}\n",
                r.cpu_hours,
                r.gpu_hours,
                r.memory_gb_hours,
                opt(r.wait_p50_s),
                opt(r.wait_p95_s),
                opt(r.wait_max_s),
                r.preemptions
            ));
        }
        out
    }
}

/// `s` as one CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One queue's admissions in a range (the dashboard's wait-time and admission charts): when
/// each job was last admitted and how long it had waited since it was enqueued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Admissions {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    /// Oldest first.
    pub admissions: Vec<Admission>,
}

/// See [`Admissions`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Admission {
    pub at: DateTime<Utc>,
    pub wait_s: f64,
}

#[cfg(test)]
mod tests {
    use super::UsageGroup;

    #[test]
    fn usage_groups_take_any_label_key_a_job_can_have() {
        assert_eq!(UsageGroup::parse(" label:o'brien "), Ok(UsageGroup::Label("o'brien".into())));
        assert_eq!(UsageGroup::parse("queue"), Ok(UsageGroup::Queue));
        assert!(UsageGroup::parse("label:a\0b").unwrap_err().contains("no NUL character"));
        assert!(UsageGroup::parse(&format!("label:{}", "k".repeat(300))).unwrap_err().contains("at most 256 bytes"));
        assert_eq!(UsageGroup::parse("label:"), Err("by: `label:` is not user, queue or label:KEY".into()));
    }
}
