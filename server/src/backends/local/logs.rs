//! Where a run's files are, and its logs: opened for appending, rotated, read (whole or a
//! tail).

use super::*;

/// Where one run's files are.
#[derive(Debug, Clone)]
pub(super) struct Paths {
    pub(super) stdout: PathBuf,
    pub(super) stderr: PathBuf,
    /// The default working directory.
    pub(super) work: PathBuf,
    /// An old-layout run's directory, holding `pid` and `exit` files too.
    pub(super) legacy: Option<PathBuf>,
}

impl Paths {
    /// The current layout: `runs/{key}.stdout`, `.stderr` and `runs/{key}/`.
    pub(super) fn new(runs: &Path, key: &str) -> Paths {
        Paths { stdout: runs.join(format!("{key}.stdout")), stderr: runs.join(format!("{key}.stderr")), work: runs.join(key), legacy: None }
    }

    /// A run of the old layout (`runs/{key}/` with `pid`, `exit`, `stdout`, `stderr`, `work/`).
    pub(super) fn legacy(runs: &Path, run: &RunId) -> Option<Paths> {
        let dir = runs.join(run.key());
        dir.join("pid").is_file().then(|| Paths { stdout: dir.join("stdout"), stderr: dir.join("stderr"), work: dir.join("work"), legacy: Some(dir) })
    }

    pub(super) fn log(&self, stream: Stream) -> PathBuf {
        match stream {
            Stream::Stdout => self.stdout.clone(),
            Stream::Stderr => self.stderr.clone(),
        }
    }

    /// An old-layout run's `pid` (`{pid} {start}`) and `exit` (`{code}`) files.
    pub(super) fn read_legacy(&self) -> Record {
        let Some(dir) = &self.legacy else { return Record::default() };
        let pid = fs::read_to_string(dir.join("pid")).ok().and_then(|text| {
            let mut parts = text.split_whitespace();
            Some(Proc { pid: parts.next()?.parse().ok()?, start: parts.next()?.parse().ok()? })
        });
        let exit = fs::read_to_string(dir.join("exit")).ok().and_then(|s| s.trim().parse().ok());
        Record { pid, exit }
    }
}

/// The working directory the local backend gave a run that named none (`data_dir` is the
/// server's, as [`LocalConfig::data_dir`]).
pub fn default_work_dir(data_dir: &Path, run: &RunId) -> PathBuf {
    let runs = data_dir.join("runs");
    Paths::legacy(&runs, run).unwrap_or_else(|| Paths::new(&runs, &run.key())).work
}

/// What is recorded of a run so far.
#[derive(Debug, Clone, Default)]
pub(super) struct Record {
    pub(super) pid: Option<Proc>,
    pub(super) exit: Option<i32>,
}

/// `path` with `suffix` appended to its file name.
pub(super) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A log file, opened for appending so it can be truncated under the writer. It is new, or
/// left empty by a start of the same run that never spawned (a restart then retries it).
pub(super) fn open_log(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// [`open_log`], making its directory first if it went missing (the backend makes it when
/// it opens, so a start does not ask each time: an `mkdir` that fails costs a path walk).
pub(super) fn open_log_in_dir(path: &Path) -> io::Result<File> {
    match open_log(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
            open_log(path)
        }
        other => other,
    }
}

/// Keeps a log under `limit`: past it, its newest `limit` bytes (plus what arrives during the
/// copy) become `{path}.1` and it starts again empty. Bytes written between the copy and the
/// truncation, a few system calls, are lost.
pub(super) fn rotate(path: &Path, limit: u64) -> io::Result<()> {
    let limit = limit.max(1);
    let len = match fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if len <= limit {
        return Ok(());
    }
    let tmp = with_suffix(path, ".1.tmp");
    let mut src = File::open(path)?;
    src.seek(SeekFrom::Start(len - limit))?;
    let mut dst = File::create(&tmp)?;
    io::copy(&mut (&mut src).take(limit), &mut dst)?;
    io::copy(&mut src.take(limit), &mut dst)?;
    fs::rename(&tmp, with_suffix(path, ".1"))?;
    OpenOptions::new().write(true).open(path)?.set_len(0)
}

/// The last `want` bytes of a log, reaching into `{path}.1` when the file is shorter.
pub(super) fn read_log(path: &Path, want: u64) -> io::Result<Vec<u8>> {
    let current = read_tail(path, want)?;
    let have = current.len() as u64;
    if have >= want {
        return Ok(current);
    }
    let mut out = read_tail(&with_suffix(path, ".1"), want - have)?;
    out.extend_from_slice(&current);
    Ok(out)
}

/// The last `want` bytes of a file; a missing file is empty.
pub(super) fn read_tail(path: &Path, want: u64) -> io::Result<Vec<u8>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(want)))?;
    let mut buf = Vec::new();
    f.take(want).read_to_end(&mut buf)?;
    Ok(buf)
}
