//! Runs that report their own end (`--ray-callback-url`).
//!
//! Without it Berth learns that a run ended only from its status poll of Ray, up to a poll
//! interval after Ray recorded it (and Ray itself notices the process's exit only on its
//! own 100 ms check). With a callback URL, a run's entrypoint is wrapped: the job's command
//! runs in a subshell, then its exit status is POSTed to Berth's
//! `POST /api/v1/runs/{run}/exit` with a token made for that run, and the same status is
//! returned to Ray. Berth ends the job as soon as the report arrives and keeps watching
//! Ray only to learn when Ray has released the run's place.
//!
//! The report is sent with `curl` when the node has it, else with Python (every Ray node
//! has one); when neither reaches Berth nothing is lost: the poll finds the end as before.
//! A report is taken only with the token Berth made when it submitted that run, by the
//! server that submitted it: a run adopted after a restart or a takeover has no token here
//! and is found by the poll.

use super::*;

/// The header a run's report carries its token in.
pub const TOKEN_HEADER: &str = "x-berth-exit-token";

/// What the wrapper runs with the command's exit status in `$1`: a POST of it to
/// `BERTH_EXIT_URL`, silent, bounded to 2 s, never changing the status.
const ON_EXIT: &str = concat!(
    r#"if command -v curl >/dev/null 2>&1; then curl -s -m 2 -o /dev/null -H "X-Berth-Exit-Token: $BERTH_EXIT_TOKEN" --data-raw "$1" "$BERTH_EXIT_URL"; "#,
    r#"else python3 -c 'import os, sys, urllib.request as u; u.urlopen(u.Request(os.environ["BERTH_EXIT_URL"], data=sys.argv[1].encode(), headers={"X-Berth-Exit-Token": os.environ["BERTH_EXIT_TOKEN"]}), timeout=2)' "$1"; "#,
    r#"fi >/dev/null 2>&1 || true"#
);

/// What became of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Taken (or already known: a stop or an earlier report).
    Taken,
    /// No run of that id is watched by this server.
    Unknown,
    /// The token is not the run's.
    Refused,
}

/// A new run's token: 16 random bytes as hex.
pub(super) fn new_token() -> String {
    let mut buf = [0u8; 16];
    getrandom::fill(&mut buf).expect("the operating system's random source works");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Turns a submission body into one whose run reports its exit to `callback` (Berth's base
/// URL as Ray's nodes reach it) with `token`.
pub(super) fn reporting(body: &mut Value, key: &str, callback: &str, token: &str) {
    let entrypoint = body["entrypoint"].as_str().unwrap_or_default();
    // The newlines keep a trailing comment or here-document of the command inside the
    // subshell; `exit` in the command ends only the subshell.
    body["entrypoint"] = Value::String(format!("(\n{entrypoint}\n)\nset -- $?; eval \"$BERTH_ON_EXIT\"; exit $1"));
    let env = body["runtime_env"]["env_vars"].as_object_mut().expect("submission() always sets env_vars");
    env.insert("BERTH_EXIT_URL".into(), Value::String(format!("{}/api/v1/runs/{key}/exit", callback.trim_end_matches('/'))));
    env.insert("BERTH_EXIT_TOKEN".into(), Value::String(token.to_string()));
    env.insert("BERTH_ON_EXIT".into(), Value::String(ON_EXIT.to_string()));
}

/// A reported exit status as an outcome: a shell gives 128 + N for a command killed by
/// signal N.
pub(super) fn outcome_of_status(status: i32) -> Outcome {
    match status {
        129..=192 => Outcome::Signaled(status - 128),
        code => Outcome::Exited(code),
    }
}

impl RayBackend {
    /// A run's own report that its command exited with `status`: the run's end is sent to
    /// the loop now (once; not for a run Berth is stopping), and the run stays watched until
    /// Ray's record of it ends.
    pub fn report_exit(&self, key: &str, token: &str, status: i32) -> Report {
        let exit = {
            let mut watched = self.lock_watched();
            let Some(w) = watched.get_mut(key) else { return Report::Unknown };
            if w.token.as_deref() != Some(token) {
                return Report::Refused;
            }
            if w.stopping || w.reported {
                return Report::Taken;
            }
            w.reported = true;
            Exit { run: w.run.clone(), outcome: outcome_of_status(status) }
        };
        tracing::debug!(run = %key, status, "run reported its exit");
        let _ = self.exits.send(exit);
        Report::Taken
    }
}
