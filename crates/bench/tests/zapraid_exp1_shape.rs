//! ZapRAID Exp#1's key claim on a small run (`bench paper zapraid-exp1` measures it at full
//! size): with 4 KiB random writes at QD16 on a `3 + 1` array, the grouped layout (Zone Append
//! inside groups of 256 stripes) beats ZoneWrite-only (every stripe a Zone Write, one command
//! at a time per member zone) in throughput and p95 latency, comes close to ZoneAppend-only,
//! and a run repeats exactly from its seed (virtual time).

use bench::zapraid_exp1::{random_writes, Writes};
use zapraid::GroupMode;

const BYTES: u64 = 24 << 20;

fn run(mode: GroupMode) -> Writes {
    let rt = emu::SimRuntime::new().expect("runtime");
    rt.block_on(random_writes(mode, BYTES, 5))
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"))
}

#[test]
fn grouped_layout_beats_zone_write_only_and_nears_zone_append_only() {
    let zw = run(GroupMode::ZoneWriteOnly);
    let gr = run(GroupMode::Grouped(256));
    let za = run(GroupMode::ZoneAppendOnly);
    println!("ZoneWrite-only {zw:?}\nG=256 {gr:?}\nZoneAppend-only {za:?}");
    let speedup = gr.mib_per_sec / zw.mib_per_sec;
    assert!(speedup >= 1.5, "G=256 at {speedup:.2}x ZoneWrite-only");
    assert!(
        gr.p95_us < 0.75 * zw.p95_us,
        "p95 {:.0} us against ZoneWrite-only's {:.0} us",
        gr.p95_us,
        zw.p95_us
    );
    let vs_append = gr.mib_per_sec / za.mib_per_sec;
    assert!(
        (0.85..=1.15).contains(&vs_append),
        "G=256 at {vs_append:.2}x ZoneAppend-only"
    );
    assert_eq!(run(GroupMode::Grouped(256)), gr, "virtual time repeats");
}
