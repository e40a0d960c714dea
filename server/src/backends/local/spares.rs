//! Spare working directories and log files, left empty by ended runs and taken by new ones
//! with a rename (see the backend's module docs for why).

use super::*;

/// Empty working directories and log files of ended runs, each to become a new run's by a
/// rename (see the module doc). A spare stays where its run left it until a start takes it:
/// one rename per reuse. Those are known to this server only; `dir` holds the spares an
/// older version left, read at start.
#[derive(Debug)]
pub(super) struct Spares {
    pub(super) dir: PathBuf,
    /// Mode, owner and group of a directory made here: a spare that differs (a job chmod-ed
    /// its working directory) is not handed to another run.
    pub(super) made: Option<(u32, u32, u32)>,
    pub(super) dirs: Mutex<Vec<PathBuf>>,
    pub(super) files: Mutex<Vec<PathBuf>>,
    /// Held by a spawn and by the lease checks of [`Spares::recycle`]: a child copies all of
    /// the server's descriptors until it execs, so a log opened for its check during a spawn
    /// would seem open elsewhere.
    pub(super) spawning: Mutex<()>,
    /// Spare directories made ahead (see [`SPARE_FLOOR`]).
    pub(super) floor: usize,
    /// Names spares: this server's start time, then a count.
    pub(super) stamp: u128,
    pub(super) count: std::sync::atomic::AtomicU64,
    /// A [`Spares::refill`] is under way.
    pub(super) refilling: std::sync::atomic::AtomicBool,
}

impl Spares {
    /// `dir` and the empty directories and files already in it (from before a restart).
    pub(super) fn open(dir: PathBuf, floor: usize) -> Spares {
        let _ = fs::create_dir_all(&dir);
        let made = fs::metadata(&dir).ok().map(|m| dir_identity(&m));
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() && is_empty_dir(&path) => dirs.push(path),
                Ok(m) if m.is_file() && m.len() == 0 => files.push(path),
                _ => {}
            }
        }
        dirs.truncate(MAX_SPARES);
        files.truncate(MAX_SPARES);
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Spares {
            dir,
            made,
            dirs: Mutex::new(dirs),
            files: Mutex::new(files),
            spawning: Mutex::new(()),
            floor,
            stamp,
            count: Default::default(),
            refilling: Default::default(),
        }
    }

    pub(super) fn name(&self) -> PathBuf {
        let n = self.count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.dir.join(format!("{}-{n}", self.stamp))
    }

    /// Moves a spare directory to `to`; false when there is none. (It was empty when it
    /// became a spare, after its run's group was gone and no one held its logs.)
    pub(super) fn take_dir(&self, to: &Path) -> bool {
        while let Some(spare) = lock(&self.dirs).pop() {
            if fs::rename(&spare, to).is_ok() {
                return true;
            }
        }
        false
    }

    /// Moves a spare file to `to` and opens it as a log; `None` when there is none.
    pub(super) fn take_file(&self, to: &Path) -> Option<File> {
        while let Some(spare) = lock(&self.files).pop() {
            if fs::rename(&spare, to).is_err() {
                continue;
            }
            match open_log(to) {
                Ok(f) if f.metadata().is_ok_and(|m| m.len() == 0) => return Some(f),
                // Not empty after all: it stays that run's log; the caller makes a fresh one.
                Ok(_) | Err(_) => {
                    let _ = fs::rename(to, self.name().with_extension("stale"));
                }
            }
        }
        None
    }

    /// Keeps what an ended run left empty, where it is, as spares: its working directory if
    /// it is as this backend makes them, its logs if they were never rotated. Nothing is kept
    /// while some process (escaped from the run's group) still has one of its logs open: it
    /// could also still write into the working directory.
    ///
    /// `fresh`: the run's logs were never rotated, so an empty log is all its run wrote
    /// (else a log is kept only when it has no `.1`).
    ///
    /// False when a log is open elsewhere (nothing was kept). Waits for a spawn under way.
    pub(super) fn recycle(&self, paths: &Paths, fresh: bool) -> bool {
        self.recycle_with(paths, fresh, lock(&self.spawning))
    }

    /// [`Spares::recycle`] unless a spawn is under way (`None`).
    pub(super) fn try_recycle(&self, paths: &Paths, fresh: bool) -> Option<bool> {
        match self.spawning.try_lock() {
            Ok(guard) => Some(self.recycle_with(paths, fresh, guard)),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(self.recycle_with(paths, fresh, e.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    pub(super) fn recycle_with(&self, paths: &Paths, fresh: bool, no_spawns: std::sync::MutexGuard<'_, ()>) -> bool {
        let mut empty = Vec::new();
        for log in [&paths.stdout, &paths.stderr] {
            let Ok(f) = File::open(log) else { continue };
            if !alone(&f) {
                return false;
            }
            if f.metadata().is_ok_and(|m| m.is_file() && m.len() == 0) && (fresh || !with_suffix(log, ".1").exists()) {
                empty.push(log);
            }
        }
        drop(no_spawns);
        let same = self.made.is_some() && fs::symlink_metadata(&paths.work).is_ok_and(|m| m.is_dir() && Some(dir_identity(&m)) == self.made);
        if same && is_empty_dir(&paths.work) {
            let mut dirs = lock(&self.dirs);
            if dirs.len() < MAX_SPARES {
                dirs.push(paths.work.clone());
            }
        }
        let mut files = lock(&self.files);
        for log in empty {
            if files.len() >= MAX_SPARES {
                break;
            }
            files.push(log.clone());
        }
        true
    }

    /// Tops the spares up to the floor on the blocking pool, once at a time (nothing outside
    /// a tokio runtime).
    pub(super) fn refill(self: &Arc<Self>) {
        let low = lock(&self.dirs).len() < self.floor || lock(&self.files).len() < 2 * self.floor;
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        if !low || self.refilling.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        let spares = self.clone();
        rt.spawn_blocking(move || {
            while lock(&spares.dirs).len() < spares.floor {
                let path = spares.name();
                if fs::create_dir(&path).is_err() {
                    break;
                }
                lock(&spares.dirs).push(path);
            }
            while lock(&spares.files).len() < 2 * spares.floor {
                let path = spares.name();
                if OpenOptions::new().write(true).create_new(true).open(&path).is_err() {
                    break;
                }
                lock(&spares.files).push(path);
            }
            spares.refilling.store(false, std::sync::atomic::Ordering::Release);
        });
    }
}


/// No other open file description of this file exists: the kernel grants a write lease only
/// then. Released at once; any failure (a file system without leases) says no.
pub(super) fn alone(f: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor we own, with integer arguments.
    let granted = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_WRLCK) } == 0;
    if granted {
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
    }
    granted
}

pub(super) fn dir_identity(m: &fs::Metadata) -> (u32, u32, u32) {
    use std::os::unix::fs::MetadataExt;
    (m.mode(), m.uid(), m.gid())
}

pub(super) fn is_empty_dir(path: &Path) -> bool {
    fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none())
}
