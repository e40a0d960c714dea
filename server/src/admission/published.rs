//! The leader's waiting list, published for followers (PostgreSQL replicas). Only the
//! leader decides, so only it knows each waiting job's position and reason. When a full
//! cycle changed them, it writes them to the database (one row, fenced by its lease like
//! its commits, at most every [`PUBLISH_EVERY`]); the write notifies every replica, and a
//! follower's view shows them (see [`State::mirror`]).

use serde::{Deserialize, Serialize};

use super::*;

/// Least time between two publications: followers lag the leader by about this much.
const PUBLISH_EVERY: Duration = Duration::from_millis(500);

/// The waiting list as stored. Each text once: a queue's waiting jobs mostly share theirs.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    texts: Vec<String>,
    /// Job id, position, reason and headline (indexes into `texts`).
    jobs: Vec<(String, u64, usize, Option<usize>)>,
}

/// Where the loop stands with its publications.
#[derive(Debug, Default)]
pub(super) struct Publication {
    /// A full cycle replaced the waiting list since the last publication.
    due: bool,
    at: Option<Instant>,
    /// What was published last (an unchanged list is not written again).
    last: String,
}

impl Waiting {
    /// The list as the leader publishes it.
    fn stored(&self) -> String {
        let mut stored = Stored::default();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (job, wait) in &self.list {
            let reason = text_index(&wait.reason, &mut index, &mut stored.texts);
            let headline = wait.headline.as_deref().map(|h| text_index(h, &mut index, &mut stored.texts));
            stored.jobs.push((job.to_string(), wait.position, reason, headline));
        }
        serde_json::to_string(&stored).unwrap_or_default()
    }

    /// A published list read back; empty when there is none (or it does not parse).
    pub fn from_published(body: &str) -> Waiting {
        let Ok(stored) = serde_json::from_str::<Stored>(body) else { return Waiting::default() };
        let texts: Vec<Arc<str>> = stored.texts.iter().map(|t| Arc::from(t.as_str())).collect();
        let list = stored
            .jobs
            .into_iter()
            .filter_map(|(job, position, reason, headline)| {
                let wait = Wait { position, reason: texts.get(reason)?.clone(), headline: headline.and_then(|h| texts.get(h).cloned()) };
                Some((Name::from(job), wait))
            })
            .collect();
        Waiting::new(list)
    }
}

/// Where `text` is in `texts`, added the first time.
fn text_index<'a>(text: &'a str, index: &mut HashMap<&'a str, usize>, texts: &mut Vec<String>) -> usize {
    *index.entry(text).or_insert_with(|| {
        texts.push(text.to_string());
        texts.len() - 1
    })
}

impl Loop {
    /// A full cycle replaced the waiting list: followers should see it (only under a term;
    /// a single server has none).
    pub(super) fn waiting_changed(&mut self) {
        self.publication.due = self.term.is_some();
    }

    /// Publishes the waiting list when it changed and the last publication is old enough;
    /// a later cycle (the tick at the latest) publishes what this one held back.
    pub(super) async fn publish_waiting(&mut self, now: i64) {
        let p = &mut self.publication;
        if !p.due || p.at.is_some_and(|t| t.elapsed() < PUBLISH_EVERY) {
            return;
        }
        p.due = false;
        let body = self.state.waiting.stored();
        if body == p.last {
            return;
        }
        p.at = Some(Instant::now());
        match self.store.publish_waiting(now, &body).await {
            Ok(()) => self.publication.last = body,
            Err(e @ crate::store::jobs::JobStoreError::Fenced(_)) => self.commit_failed(&e),
            Err(e) => {
                tracing::warn!(error = %e, "cannot publish the waiting list for other replicas; trying again");
                self.publication.due = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(position: u64, reason: &str, headline: Option<&str>) -> Wait {
        Wait { position, reason: reason.into(), headline: headline.map(Arc::from) }
    }

    #[test]
    fn a_published_list_reads_back_the_same() {
        let full = "queue q: cpu quota 2, in use 2, requested 1";
        let list = vec![
            (Name::from("j-1"), wait(1, full, Some("Waiting for CPU"))),
            (Name::from("j-2"), wait(2, full, Some("Waiting for CPU"))),
            (Name::from("j-3"), wait(0, "held by ann", None)),
        ];
        let body = Waiting::new(list).stored();
        // Shared texts are stored once.
        assert_eq!(body.matches(full).count(), 1, "{body}");
        let back = Waiting::from_published(&body);
        let seen = |id: &str| back.get(id).map(|w| (w.position, w.reason.to_string(), w.headline.map(|h| h.to_string())));
        assert_eq!(seen("j-1"), Some((1, full.to_string(), Some("Waiting for CPU".to_string()))));
        assert_eq!(seen("j-2"), Some((2, full.to_string(), Some("Waiting for CPU".to_string()))));
        assert_eq!(seen("j-3"), Some((0, "held by ann".to_string(), None)));
        assert!(back.get("j-4").is_none());
    }

    #[test]
    fn nothing_published_or_unreadable_is_an_empty_list() {
        for body in ["", "{not json", r#"{"texts": [], "jobs": [["j-1", 1, 5, null]]}"#] {
            assert!(Waiting::from_published(body).get("j-1").is_none(), "{body}");
        }
    }
}
