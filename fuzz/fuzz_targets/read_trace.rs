//! Any bytes as one rank file → what every command does with a rank file: the streaming
//! reader (`trace show`), the statistics (`trace stats`), the whole rank in memory
//! (`topo`'s and the tests' `RankTrace`), and the skeletonizer over it (`skeletonize` of a
//! one-rank trace); and the same bytes as a `manifest.json`.
//!
//! Asserts issue 19's requirements: no input makes any of them panic, overflow the stack
//! or stall (libFuzzer's `-timeout`), and memory stays proportional to the input, never
//! to a number written in it: the target counts every byte allocated (a counting global
//! allocator) and fails when the peak while handling one input exceeds
//! [`FIXED_BYTES`] + [`BYTES_PER_INPUT_BYTE`] × the input's length.

#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;
use perfskel_compiler::skeletonize::{self, InMemory, Input, Options, RankSource};
use perfskel_compiler::trace::stats::StatsBuilder;
use perfskel_compiler::trace::symbolize::Location;
use perfskel_compiler::trace::{Manifest, RankReader, RankTrace};

/// Memory any input may use: the reader's 64 KiB buffer, tables, the skeletonizer's
/// fixed structures.
const FIXED_BYTES: usize = 8 << 20;
/// Memory per input byte: an event takes at least 5 bytes of file and about 200 bytes
/// in memory (`RankTrace` holds them all, the skeletonizer its tokens and nests).
const BYTES_PER_INPUT_BYTE: usize = 400;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let now = CURRENT.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn read(data: &[u8]) {
    // Streaming, as `trace show` reads.
    if let Ok(reader) = RankReader::new(data, None) {
        for ev in reader {
            if ev.is_err() {
                break;
            }
        }
    }
    // Statistics, as `trace stats` gathers them.
    if let Ok(mut reader) = RankReader::new(data, None) {
        let mut stats = StatsBuilder::new(reader.header().n_ranks);
        if stats.add_rank(&mut reader).is_ok() {
            let _ = stats.report(&|_| Location::default());
        }
    }
    // The whole rank in memory, then skeletonized alone.
    let Ok(reader) = RankReader::new(data, None) else {
        return;
    };
    let Ok(trace) = RankTrace::read(reader) else {
        return;
    };
    let ranks = InMemory(vec![RankSource::Trace(&trace)]);
    let input = Input {
        name: "fuzz".into(),
        ranks: &ranks,
        site_name: &|_| None,
        origin: "fuzz input".into(),
    };
    let _ = skeletonize::skeletonize(&input, &Options::default(), &mut |_| {});
}

fuzz_target!(|data: &[u8]| {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    read(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Manifest::from_json(text);
    }
    let used = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let bound = FIXED_BYTES + BYTES_PER_INPUT_BYTE * data.len();
    assert!(
        used <= bound,
        "{used} bytes allocated for an input of {} bytes (bound {bound})",
        data.len()
    );
});
