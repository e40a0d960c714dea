//! Processes: a run's leader and its group, known through `/proc`, and signals to them.

use super::*;

/// The leader of a run's process group, as the journal records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Proc {
    pub(super) pid: i32,
    /// Field 22 of `/proc/{pid}/stat`, as older versions recorded it, to tell this process
    /// from a later one with its pid. 0 (now always): its environment tells it, since it
    /// holds the run's key (see [`leader_is`]); a start then reads nothing in `/proc`.
    pub(super) start: u64,
}


/// What `/proc/{pid}/stat` says of a process.
pub(super) struct Stat {
    pub(super) state: char,
    /// Its process group.
    pub(super) group: i32,
    pub(super) start: u64,
}

pub(super) fn read_stat(pid: i32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the last `)`.
    let fields: Vec<&str> = text.get(text.rfind(')')? + 1..)?.split_whitespace().collect();
    // Counting from the state, field 3: the group is field 5, the start time field 22.
    let state = fields.first()?.chars().next()?;
    let group = fields.get(2)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some(Stat { state, group, start })
}

/// The leaders of the runs that write to a journal segment in `dir`, found in `/proc` by the
/// environment they were started with: `(key, segment, leader)`. A server that died between
/// a spawn and its pid line left such a run without a record.
pub(super) fn leaders_writing_to(dir: &Path) -> Vec<(String, u64, Proc)> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        // Only a group's leader: a forked subshell keeps the environment it was forked with.
        if read_stat(pid).is_none_or(|s| s.group != pid || matches!(s.state, 'Z' | 'X' | 'x')) {
            continue;
        }
        let Ok(env) = fs::read(entry.path().join("environ")) else { continue };
        let var = |name: &str| {
            env.split(|b| *b == 0).find_map(|v| v.strip_prefix(name.as_bytes())).and_then(|v| std::str::from_utf8(v).ok())
        };
        let (Some(key), Some(journal)) = (var("BERTH_RUN_KEY="), var("BERTH_JOURNAL=")) else { continue };
        let journal = Path::new(journal);
        let segment = journal.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse().ok());
        if let (true, Some(segment)) = (journal.parent() == Some(dir), segment) {
            found.push((key.to_string(), segment, Proc { pid, start: 0 }));
        }
    }
    found
}

/// True when `pid` is a running (not zombie) process.
#[cfg(test)]
pub(super) fn pid_alive(pid: i32) -> bool {
    read_stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X' | 'x'))
}

/// Whether the process holding the leader's pid is the run's leader (`None`: no process
/// holds it). A leader recorded without a start time is known by the run key it was started
/// with: the kernel keeps a process's first environment, whatever its shell unsets. A zombie
/// has none left, so it never counts as the leader here.
pub(super) fn leader_is(proc: Proc, key: &str) -> Option<bool> {
    if proc.start != 0 {
        return read_stat(proc.pid).map(|s| s.start == proc.start);
    }
    let env = match fs::read(format!("/proc/{}/environ", proc.pid)) {
        Ok(env) => env,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(_) => return Some(false),
    };
    let want = format!("BERTH_RUN_KEY={key}");
    Some(env.split(|b| *b == 0).any(|var| var == want.as_bytes()))
}

/// The run's leader itself is still running.
pub(super) fn is_alive(proc: Proc, key: &str) -> bool {
    if proc.start != 0 {
        return read_stat(proc.pid).is_some_and(|s| s.start == proc.start && !matches!(s.state, 'Z' | 'X' | 'x'));
    }
    leader_is(proc, key) == Some(true)
}

/// The group with the leader's pid can only be the run's: the leader is that process, or it is
/// gone (the kernel does not hand out a pid still used as a group id). A pid now held by
/// another process means the group died long ago.
pub(super) fn is_ours(proc: Proc, key: &str) -> bool {
    leader_is(proc, key) != Some(false)
}

pub(super) fn group_exists(pgid: i32) -> bool {
    pgid > 1 && unsafe { libc::killpg(pgid, 0) } == 0
}

/// `killpg`, refusing the groups that would hit the server itself.
pub(super) fn signal_group(pgid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: getpgrp and killpg take plain integers and touch no memory of ours.
    if pgid <= 1 || pgid == unsafe { libc::getpgrp() } {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("refusing to signal process group {pgid}")));
    }
    if unsafe { libc::killpg(pgid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Stops what a run left in its group after its leader ended: SIGTERM, SIGKILL after `grace`.
pub(super) async fn end_group(proc: Proc, key: &str, grace: Duration) {
    // The usual end: the group is gone, which a signal 0 says without reading `/proc`.
    if !group_exists(proc.pid) || !is_ours(proc, key) || signal_group(proc.pid, libc::SIGTERM).is_err() {
        return;
    }
    for (sig, wait) in [(None, grace), (Some(libc::SIGKILL), KILL_WAIT)] {
        if let Some(sig) = sig {
            if !is_ours(proc, key) || signal_group(proc.pid, sig).is_err() {
                return;
            }
        }
        let deadline = Instant::now() + wait;
        while group_exists(proc.pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !group_exists(proc.pid) {
            return;
        }
    }
}
