//! Running Slurm's client commands: bounded in time, with the cluster's `SLURM_CONF`, and
//! without Berth's own environment (its secrets must not reach jobs through `sbatch`).

use super::*;

/// Why a command failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CliError {
    /// Slurm cannot be asked now (controller down, timeout, command missing).
    Unreachable(String),
    /// Slurm answered with an error (its last line).
    Refused(String),
}

impl CliError {
    pub(super) fn text(&self) -> &str {
        match self {
            CliError::Unreachable(t) | CliError::Refused(t) => t,
        }
    }

    pub(super) fn into_backend(self, what: &str) -> BackendError {
        match self {
            CliError::Unreachable(t) => BackendError::Unavailable(format!("{what}: {t}")),
            CliError::Refused(t) => BackendError::Failed(format!("{what}: {t}")),
        }
    }
}

/// Error text that means the controller is away rather than the request wrong.
fn unreachable_text(text: &str) -> bool {
    [
        "Unable to contact slurm controller",
        "Socket timed out",
        "Connection refused",
        "Zero Bytes were transmitted",
        "Could not establish a configuration source",
        "Communication connection failure",
        "Slurm backup controller in standby mode",
        "Transport endpoint is not connected",
    ]
    .iter()
    .any(|t| text.contains(t))
}

impl SlurmBackend {
    /// Runs `program args…`; its standard output.
    pub(super) async fn run(&self, program: &str, args: &[String]) -> Result<String, CliError> {
        let path = match &self.cfg.bin_dir {
            Some(dir) => dir.join(program),
            None => PathBuf::from(program),
        };
        let mut cmd = tokio::process::Command::new(&path);
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        // A stale token would switch the commands to auth/jwt; Berth's settings and secrets
        // (BERTH_*) would be copied into every job by sbatch's default --export=ALL.
        cmd.env_remove("SLURM_JWT");
        for (k, _) in std::env::vars_os() {
            if k.to_str().is_some_and(|k| k.starts_with("BERTH_")) {
                cmd.env_remove(&k);
            }
        }
        if let Some(conf) = &self.cfg.conf {
            cmd.env("SLURM_CONF", conf);
        }
        let child = cmd.spawn().map_err(|e| CliError::Unreachable(format!("cannot run {}: {e}", path.display())))?;
        let out = match tokio::time::timeout(self.cfg.command_timeout, child.wait_with_output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(CliError::Unreachable(format!("{program}: {e}"))),
            Err(_) => return Err(CliError::Unreachable(format!("{program} did not answer within {:?}", self.cfg.command_timeout))),
        };
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            return Ok(stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let text = format!("{program}: {}", last_line(&format!("{stdout}\n{stderr}")));
        if unreachable_text(&stderr) {
            Err(CliError::Unreachable(text))
        } else {
            Err(CliError::Refused(text))
        }
    }
}
