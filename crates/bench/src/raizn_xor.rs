//! Parity throughput of the RAID layers against the machine's memory bandwidth, measured in
//! the same run (real time, not virtual: this is CPU work). The parity of a RAIZN stripe is
//! computed by `zns::parity::parity_into` as the write path does it (`d` data units of one
//! stripe unit into one parity unit); the baseline is a plain copy of the same number of
//! bytes, which reads and writes each byte once. Parity reads each data byte once and writes
//! one byte per `d`, so a memory-bound parity loop can match or pass the copy; the floor set
//! for it is 80% of the copy.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::paper::{Options, Row};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;
/// Data units per stripe (a 5-member RAID-5) and the default stripe unit.
const DATA_UNITS: usize = 4;
const UNIT: usize = 64 * KIB;
/// Bytes of data per pass: far larger than any cache, so both loops run from memory.
const DATA_BYTES: usize = 64 * MIB;
/// Each figure is the best of this many passes (the machine is shared; the best pass is the
/// one least disturbed), and each pass lasts at least `MIN_PASS`.
const PASSES: usize = 5;
const MIN_PASS: Duration = Duration::from_millis(200);

/// MiB/s of `bytes` per call of `f`, best of `PASSES` passes.
fn best_rate(bytes: usize, mut f: impl FnMut()) -> f64 {
    let mut best = 0f64;
    for _ in 0..PASSES {
        let start = Instant::now();
        let mut calls = 0u32;
        while calls == 0 || start.elapsed() < MIN_PASS {
            f();
            calls += 1;
        }
        let secs = start.elapsed().as_secs_f64();
        let rate = (bytes as f64 * f64::from(calls)) / (MIB as f64) / secs;
        best = best.max(rate);
    }
    best
}

/// Copy and parity rates (MiB/s of data) over `data_bytes` of stripes of `units` x `unit`.
pub fn measure(data_bytes: usize, units: usize, unit: usize) -> (f64, f64) {
    let stripe = units * unit;
    let data_bytes = (data_bytes / stripe).max(1) * stripe;
    // Data that is not all zeros, so nothing can shortcut it.
    let src: Vec<u8> = (0..data_bytes).map(|i| (i * 31 + i / 4096) as u8).collect();
    let mut dst = vec![0u8; data_bytes];
    let copy = best_rate(data_bytes, || {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    });
    let mut parity = vec![0u8; data_bytes / units];
    let xor = best_rate(data_bytes, || {
        for (s, p) in src.chunks_exact(stripe).zip(parity.chunks_exact_mut(unit)) {
            let refs: Vec<&[u8]> = s.chunks_exact(unit).collect();
            zns::parity::parity_into(p, &refs);
        }
        black_box(&mut parity);
    });
    (copy, xor)
}

/// The row: parity throughput as a percentage of the copy's, against the 80% floor.
/// `o.bytes_per_point` bounds the buffers (at most 64 MiB of data).
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    let data = DATA_BYTES.min(usize::try_from(o.bytes_per_point).unwrap_or(DATA_BYTES));
    let (copy, xor) = measure(data, DATA_UNITS, UNIT);
    if copy <= 0.0 || !copy.is_finite() {
        return Err(format!("the copy measured {copy} MiB/s"));
    }
    Ok(vec![Row::new(
        format!(
            "raizn-xor parity of {DATA_UNITS} x {} KiB units ({xor:.0} MiB/s) / memory copy ({copy:.0} MiB/s), {} MiB of data (%; floor 80)",
            UNIT / KIB,
            data / MIB
        ),
        80.0,
        xor / copy * 100.0,
    )])
}
