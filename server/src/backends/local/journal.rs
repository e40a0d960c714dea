//! The run journal: one line per spawn and per exit code, in segments deleted once the
//! database lists none of their runs as unfinished.

use super::*;

/// The runs' pid and exit lines, by segment (see the module doc).
#[derive(Debug)]
pub(super) struct Journal {
    pub(super) dir: PathBuf,
    /// Runs a segment takes ([`SEGMENT_RUNS`]; fewer in tests).
    pub(super) per_segment: usize,
    pub(super) state: Mutex<Segments>,
}

#[derive(Debug, Default)]
pub(super) struct Segments {
    /// The segment new runs are begun in: a fresh one per server.
    pub(super) current: u64,
    /// Runs begun in `current`.
    pub(super) begun: usize,
    /// `current`, open for appending once something was written to it.
    pub(super) file: Option<File>,
    pub(super) all: BTreeMap<u64, Segment>,
}

/// What one segment says, and how much of it has been read.
#[derive(Debug, Default)]
pub(super) struct Segment {
    pub(super) runs: HashMap<String, Record>,
    /// Bytes parsed, up to the last complete line.
    pub(super) read: u64,
}

impl Journal {
    /// Reads every segment in `dir`; new runs go to a new one.
    pub(super) fn open(dir: PathBuf, per_segment: usize) -> Journal {
        let _ = fs::create_dir_all(&dir);
        let mut all = BTreeMap::new();
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            if let Some(n) = entry.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) {
                let mut segment = Segment::default();
                segment.refresh(&entry.path());
                all.insert(n, segment);
            }
        }
        let current = all.keys().next_back().map_or(1, |n| n + 1);
        all.insert(current, Segment::default());
        let journal = Journal { dir, per_segment, state: Mutex::new(Segments { current, begun: 0, file: None, all }) };
        // A server killed between a spawn and its pid line left a run with no record: found
        // by its environment, it is recorded now, so recovery adopts it and never starts it
        // twice (also when another replica on this data dir reads the journal again).
        let found = journal.record_unrecorded(leaders_writing_to(&journal.dir));
        if found > 0 {
            tracing::warn!(runs = found, "found runs started just before a server stopped, with no pid recorded; adopting them");
        }
        journal
    }

    /// Reads every segment again, and begins new runs in a new one: another server on this
    /// data dir (a replica that led before) may have written segments since [`Journal::open`].
    pub(super) fn reopen(&self) {
        let fresh = Journal::open(self.dir.clone(), self.per_segment);
        let segments = fresh.state.into_inner().unwrap_or_else(|e| e.into_inner());
        *lock(&self.state) = segments;
    }

    pub(super) fn path(&self, segment: u64) -> PathBuf {
        self.dir.join(segment.to_string())
    }

    /// Enters a run about to be started; the segment its lines go to, or `None` when the
    /// run was started already.
    pub(super) fn begin(&self, key: &str) -> Option<u64> {
        let mut s = lock(&self.state);
        if s.all.values().any(|seg| seg.runs.get(key).is_some_and(|r| r.pid.is_some() || r.exit.is_some())) {
            return None;
        }
        if s.begun >= self.per_segment {
            s.current += 1;
            s.begun = 0;
            s.file = None;
            let current = s.current;
            s.all.insert(current, Segment::default());
        }
        s.begun += 1;
        let current = s.current;
        s.all.entry(current).or_default().runs.entry(key.to_string()).or_default();
        Some(current)
    }

    /// Appends the pid line of a run begun in `segment` (one write).
    pub(super) fn record_pid(&self, segment: u64, key: &str, proc: Proc) -> io::Result<()> {
        let line = format!("pid {key} {} {}\n", proc.pid, proc.start);
        let mut s = lock(&self.state);
        if segment == s.current {
            if s.file.is_none() {
                s.file = Some(OpenOptions::new().create(true).append(true).open(self.path(segment))?);
            }
            s.file.as_mut().expect("opened above").write_all(line.as_bytes())?;
        } else {
            OpenOptions::new().create(true).append(true).open(self.path(segment))?.write_all(line.as_bytes())?;
        }
        if let Some(seg) = s.all.get_mut(&segment) {
            seg.runs.entry(key.to_string()).or_default().pid = Some(proc);
        }
        Ok(())
    }

    /// Writes the pid lines of running leaders the journal has no pid of (see
    /// [`leaders_writing_to`]), each to the segment its run writes its code to; how many.
    pub(super) fn record_unrecorded(&self, leaders: Vec<(String, u64, Proc)>) -> usize {
        let mut recorded = 0;
        for (key, segment, proc) in leaders {
            let known = lock(&self.state).all.values().any(|seg| seg.runs.get(&key).is_some_and(|r| r.pid.is_some()));
            if known {
                continue;
            }
            lock(&self.state).all.entry(segment).or_default();
            match self.record_pid(segment, &key, proc) {
                Ok(()) => recorded += 1,
                Err(e) => tracing::warn!(run = %key, error = %e, "cannot record the pid of a run found running"),
            }
        }
        recorded
    }

    /// A run's record, with its segment read up to now; `None` for a run not begun here.
    pub(super) fn lookup(&self, key: &str) -> Option<Record> {
        let mut s = lock(&self.state);
        let n = *s.all.iter().find(|(_, seg)| seg.runs.contains_key(key))?.0;
        let path = self.path(n);
        let seg = s.all.get_mut(&n)?;
        seg.refresh(&path);
        seg.runs.get(key).cloned()
    }

    /// Keys of the runs with a pid or exit line, in every segment.
    pub(super) fn begun(&self) -> Vec<String> {
        let s = lock(&self.state);
        s.all.values().flat_map(|seg| seg.runs.iter().filter(|(_, r)| r.pid.is_some() || r.exit.is_some()).map(|(k, _)| k.clone())).collect()
    }

    pub(super) fn has_old_segments(&self) -> bool {
        lock(&self.state).all.len() > 1
    }

    /// Deletes every segment but the current one that holds none of `live`.
    pub(super) fn retain(&self, live: &HashSet<String>) {
        let mut s = lock(&self.state);
        let current = s.current;
        let dead: Vec<u64> = s.all.iter().filter(|(n, seg)| **n != current && !seg.runs.keys().any(|k| live.contains(k))).map(|(n, _)| *n).collect();
        for n in dead {
            match fs::remove_file(self.path(n)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(segment = %self.path(n).display(), error = %e, "cannot delete a journal segment");
                    continue;
                }
            }
            s.all.remove(&n);
        }
    }
}

impl Segment {
    /// Parses what was appended to the file since the last read.
    pub(super) fn refresh(&mut self, path: &Path) {
        let Ok(mut f) = File::open(path) else { return };
        if f.seek(SeekFrom::Start(self.read)).is_err() {
            return;
        }
        let mut text = String::new();
        if f.read_to_string(&mut text).is_err() {
            return;
        }
        // A line still being written waits for the next read.
        let Some(end) = text.rfind('\n') else { return };
        for line in text[..end].lines() {
            let mut words = line.split_whitespace();
            let (Some(kind), Some(key)) = (words.next(), words.next()) else { continue };
            let record = self.runs.entry(key.to_string()).or_default();
            match kind {
                "pid" => {
                    if let (Some(Ok(pid)), Some(Ok(start))) = (words.next().map(str::parse), words.next().map(str::parse)) {
                        record.pid = Some(Proc { pid, start });
                    }
                }
                "exit" => record.exit = words.next().and_then(|c| c.parse().ok()).or(record.exit),
                _ => {}
            }
        }
        self.read += end as u64 + 1;
    }
}
