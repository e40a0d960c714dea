//! Short time slices for the server's own threads, so a host whose cores are all busy with
//! jobs still answers requests and turns slots over promptly.
//!
//! Linux's EEVDF scheduler (6.12 and later) lets a thread ask for a shorter slice than the
//! default (which grows with the core count: 1.4 ms on a 2-core host): when it wakes, it may preempt a job that is mid-slice
//! instead of queueing behind it. The server's threads run for tens of microseconds at a time
//! (an exit to handle, a start, a request), so they ask for the shortest slice (0.1 ms); this
//! changes when they run, not how much CPU they get. The request carries `RESET_ON_FORK`, so
//! the processes the server starts (jobs) and the threads its libraries create keep the
//! default. On an older kernel the slice is ignored; where the call is refused (seccomp, a
//! non-Linux build), nothing changes.

/// The slice asked for: the shortest Linux grants.
const SLICE_NS: u64 = 100_000;

/// Asks for a short slice for the calling thread (see the module doc). Call it on each
/// thread of the server: tokio's `on_thread_start` and the main thread.
pub fn prefer_calling_thread() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed `sched_attr` is valid; the call only reads it.
        let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
        attr.size = std::mem::size_of::<libc::sched_attr>() as u32;
        attr.sched_policy = libc::SCHED_OTHER as u32;
        attr.sched_flags = libc::SCHED_FLAG_RESET_ON_FORK as u64;
        attr.sched_runtime = SLICE_NS;
        // Keep the thread's nice value: only the slice changes.
        // SAFETY: tid 0 is the calling thread; `attr` outlives the call.
        unsafe {
            attr.sched_nice = libc::getpriority(libc::PRIO_PROCESS, 0);
            libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const libc::sched_attr, 0);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// The slice a thread has, from `/proc/thread-self/sched` (absent on kernels without
    /// EEVDF's custom slices).
    fn slice_ns(path: &str) -> Option<u64> {
        let text = std::fs::read_to_string(path).ok()?;
        text.lines().find(|l| l.starts_with("se.slice")).and_then(|l| l.split(':').nth(1)).and_then(|v| v.trim().parse().ok())
    }

    #[test]
    fn the_calling_thread_gets_the_short_slice_and_its_children_do_not() {
        std::thread::spawn(|| {
            super::prefer_calling_thread();
            if slice_ns("/proc/thread-self/sched") != Some(super::SLICE_NS) {
                return; // a kernel without custom slices (before 6.12): nothing changed
            }
            let mut child = std::process::Command::new("sleep").arg("5").spawn().expect("sleep starts");
            let theirs = slice_ns(&format!("/proc/{}/sched", child.id()));
            let _ = child.kill();
            let _ = child.wait();
            assert!(theirs.is_some_and(|s| s != super::SLICE_NS), "a process the server starts keeps the default slice: {theirs:?}");
            let thread = std::thread::spawn(|| slice_ns("/proc/thread-self/sched")).join().unwrap();
            assert!(thread.is_some_and(|s| s != super::SLICE_NS), "a thread a library starts keeps the default slice: {thread:?}");
        })
        .join()
        .unwrap();
    }
}
