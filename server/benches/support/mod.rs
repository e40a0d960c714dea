//! What the in-process benches share: a heap counter (install it with
//! `#[global_allocator] static GLOBAL: support::Counting = support::Counting;`, then read
//! [`LIVE`] and [`PEAK`]) and a deterministic xorshift, so each run builds the same workload.

#![allow(dead_code)] // each bench uses its part

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counts live and peak heap bytes, so memory is measured, not guessed.
pub struct Counting;

pub static LIVE: AtomicUsize = AtomicUsize::new(0);
pub static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Relaxed) + new - l.size();
                PEAK.fetch_max(now, Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Relaxed);
            }
        }
        q
    }
}

/// Deterministic xorshift: the same workload every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// One of `xs`.
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// One row of a table against Kueue's measured mean: Berth's target is half of it (`le`),
/// or at least as much (usage).
pub fn against_kueue(name: &str, got: f64, kueue: f64, le: bool, unit: &str) {
    let target = if le { kueue / 2.0 } else { kueue };
    let ok = if le { got <= target } else { got >= target };
    println!(
        "{name:<44} | {got:>9.1} {unit:<2} | {kueue:>9.1} {unit:<2} | {} {target:>7.1} {unit:<2} | {:>4}",
        if le { "<=" } else { ">=" },
        if ok { "yes" } else { "NO" }
    );
}

/// The header of a table of [`against_kueue`] rows.
pub fn kueue_header() {
    println!("{:<44} | {:>12} | {:>12} | {:>13} | {:>4}", "metric", "berth", "kueue mean", "target", "ok");
    println!("{}", "-".repeat(98));
}
