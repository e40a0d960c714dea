//! A job's two log streams as one text, for `GET /api/v1/jobs/{id}/logs?stream=both` (what
//! `berth jobs logs` and `berth jobs submit --wait` print): whole lines, in the order they
//! were read, each stderr line marked, so a failing job's errors show among its output.
//!
//! The streams are two files, so lines are ordered by when a read found them (every
//! follower poll), not by when the job wrote them: lines written within one poll keep
//! stdout's before stderr's.

use crate::backends::Stream;

/// Put before each stderr line.
pub const STDERR_MARK: &str = "[stderr] ";

/// A line longer than this is passed on unfinished (a progress bar that never ends its line).
const MAX_PARTIAL: usize = 64 * 1024;

/// Joins the two streams line by line; keeps each stream's unfinished last line.
#[derive(Debug, Default)]
pub struct Mux {
    partial: [Vec<u8>; 2],
}

impl Mux {
    /// The whole lines `bytes` completes, stderr ones marked; an unfinished last line waits
    /// for the next call (or [`Mux::finish`]).
    pub fn push(&mut self, stream: Stream, bytes: &[u8]) -> Vec<u8> {
        let buf = &mut self.partial[slot(stream)];
        buf.extend_from_slice(bytes);
        let cut = match buf.iter().rposition(|b| *b == b'\n') {
            Some(i) => i + 1,
            None if buf.len() > MAX_PARTIAL => buf.len(),
            None => return Vec::new(),
        };
        let rest = buf.split_off(cut);
        let lines = std::mem::replace(buf, rest);
        mark(stream, &lines)
    }

    /// The unfinished lines left (the job has ended), each ended with a newline.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for stream in [Stream::Stdout, Stream::Stderr] {
            let mut rest = std::mem::take(&mut self.partial[slot(stream)]);
            if !rest.is_empty() {
                rest.push(b'\n');
                out.extend(mark(stream, &rest));
            }
        }
        out
    }
}

fn slot(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

fn mark(stream: Stream, lines: &[u8]) -> Vec<u8> {
    if stream == Stream::Stdout {
        return lines.to_vec();
    }
    let mut out = Vec::with_capacity(lines.len() + 16);
    for line in lines.split_inclusive(|b| *b == b'\n') {
        out.extend_from_slice(STDERR_MARK.as_bytes());
        out.extend_from_slice(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).unwrap()
    }

    #[test]
    fn whole_lines_pass_in_order_and_stderr_is_marked() {
        let mut m = Mux::default();
        assert_eq!(text(m.push(Stream::Stdout, b"one\ntw")), "one\n");
        assert_eq!(text(m.push(Stream::Stderr, b"oops\nbad\n")), "[stderr] oops\n[stderr] bad\n");
        assert_eq!(text(m.push(Stream::Stdout, b"o\n")), "two\n");
        assert_eq!(text(m.push(Stream::Stderr, b"no newline")), "");
        assert_eq!(text(m.finish()), "[stderr] no newline\n");
        assert_eq!(text(m.finish()), "");
    }

    #[test]
    fn a_line_that_never_ends_is_passed_on_when_long() {
        let mut m = Mux::default();
        let long = vec![b'x'; MAX_PARTIAL + 1];
        assert_eq!(m.push(Stream::Stdout, &long).len(), MAX_PARTIAL + 1);
        assert!(m.finish().is_empty());
    }
}
