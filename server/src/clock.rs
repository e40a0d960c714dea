//! The one source of time and of new ids.
//!
//! Everything that stamps a job, an event or a sample reads the time here, so that tests of
//! the admission loop can drive time by hand (see `admission`'s harness).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Microseconds since the epoch.
pub fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// A new id: `j-` (or another prefix), the time in ms in base 36, a per-process counter
/// (3 digits: ids made in the same millisecond by one server never collide, up to 46,656)
/// and 4 random digits (against other servers). Safe for file names and Ray submission ids.
pub fn new_id(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(n);
    h.write_i64(now_us());
    let ms = (now_us() / 1000) as u64;
    format!("{prefix}-{}{}{}", base36(ms, 0), base36(n % 36u64.pow(3), 3), base36(h.finish() % 36u64.pow(4), 4))
}

fn base36(mut n: u64, width: usize) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    while n > 0 || out.is_empty() {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
    }
    while out.len() < width {
        out.push(b'0');
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The time the admission loop stamps jobs and events with and judges timeouts and
/// retry backoffs by: the system clock in the server, a hand-moved one in tests.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Microseconds since the epoch.
    fn now_us(&self) -> i64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        now_us()
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock reading `at_us`.
    pub fn new(at_us: i64) -> ManualClock {
        ManualClock(AtomicI64::new(at_us))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_micros() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_made_in_a_burst_are_unique() {
        let ids: std::collections::HashSet<String> = (0..20_000).map(|_| super::new_id("j")).collect();
        assert_eq!(ids.len(), 20_000);
        assert!(ids.iter().all(|id| id.starts_with("j-") && id[2..].chars().all(|c| c.is_ascii_alphanumeric())));
    }
}
