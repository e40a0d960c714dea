//! Following a job's log while it grows, until the job ends: what `GET
//! /api/v1/jobs/{id}/logs?follow=true` streams and Ray's `/api/jobs/{id}/logs/tail`
//! WebSocket sends.

use std::time::Duration;

use crate::backends::Stream;
use crate::services::jobs::Runtime;

/// Most bytes one logs response returns.
pub(crate) const MAX_LOG: u64 = 16 * 1024 * 1024;

/// Time between two reads of a followed log.
const POLL: Duration = Duration::from_millis(300);

/// What a follower found since its last call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Growth {
    /// New bytes of one of the followed streams.
    Bytes(Stream, Vec<u8>),
    /// The job started run `n` (after a preemption or a retry); its log starts empty.
    NewRun(i64),
}

/// A cursor over one job's log streams.
pub struct Follower {
    runtime: Runtime,
    job: String,
    /// Each followed stream and how many of its bytes were seen.
    streams: Vec<(Stream, usize)>,
    run: i64,
    ended: bool,
}

impl Follower {
    /// Follows `streams` of `job` from `seen` bytes into its run `run` (0: not started).
    pub fn new(runtime: Runtime, job: String, streams: Vec<(Stream, usize)>, run: i64) -> Follower {
        Follower { runtime, job, streams, run, ended: false }
    }

    /// The next growth, waiting for it; `None` once the job has ended and its last bytes
    /// were given (or it cannot be read any more).
    pub async fn next(&mut self) -> Option<Vec<Growth>> {
        if self.ended {
            return None;
        }
        loop {
            tokio::time::sleep(POLL).await;
            let mut found = Vec::new();
            // The last stream is read first (see [`read_order`]); `read_so_far` holds the
            // bytes found since the last run change, in the streams' order.
            let mut read_so_far: Vec<Growth> = Vec::new();
            let mut ended = true;
            for i in read_order(self.streams.len()) {
                let (stream, seen) = self.streams[i];
                let read = self.runtime.read_log(&self.job, stream, Some(MAX_LOG)).await.ok()?;
                ended &= read.state.is_terminal();
                if read.run != self.run {
                    found.append(&mut read_so_far);
                    if self.run > 0 {
                        found.push(Growth::NewRun(read.run));
                    }
                    self.run = read.run;
                    self.streams.iter_mut().for_each(|s| s.1 = 0);
                }
                let seen = if self.streams[i].1 == 0 { 0 } else { seen };
                // A rotated log is shorter than what was seen: start over from its beginning.
                let new = if read.bytes.len() >= seen { &read.bytes[seen..] } else { &read.bytes[..] };
                if !new.is_empty() {
                    read_so_far.insert(0, Growth::Bytes(stream, new.to_vec()));
                }
                self.streams[i].1 = read.bytes.len();
            }
            found.append(&mut read_so_far);
            if ended {
                self.ended = true;
            }
            if !found.is_empty() || ended {
                return Some(found);
            }
        }
    }
}

/// The order to read a job's streams in: the last first. Given in stdout-then-stderr order,
/// stderr is read before stdout, so a stderr line shown was written before the stdout read
/// and a job that writes to stdout, then to stderr, is shown in that order (read stdout
/// first, a poll could fall between the two writes and find only the stderr line).
pub(crate) fn read_order(streams: usize) -> impl Iterator<Item = usize> {
    (0..streams).rev()
}
