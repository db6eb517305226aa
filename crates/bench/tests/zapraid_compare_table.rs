//! The ZapRAID vs host FTL vs RAIZN + host FTL table on a small run (`bench paper
//! zapraid-compare` measures it at full size): every system completes the three phases with
//! figures above zero, ZapRAID's 4 KiB random writes beat the single drive's (four drives
//! against one) and the FTL on RAIZN's (whose small writes pay RAIZN's partial parity), and a
//! run repeats exactly from its seed (virtual time). At this size the sequential phase fits
//! in the members' write caches, so it is not compared here.

use bench::zapraid_compare::{measure, Figures, System};

const BYTES: u64 = 8 << 20;

fn run(s: System) -> Figures {
    let rt = emu::SimRuntime::new().expect("runtime");
    rt.block_on(measure(s, BYTES, 3))
        .unwrap_or_else(|e| panic!("{}: {e}", s.name()))
}

#[test]
fn three_systems_complete_the_workload_and_repeat() {
    let z = run(System::ZapRaid);
    let one = run(System::FtlOneDrive);
    let rz = run(System::FtlOverRaizn);
    println!("ZapRAID {z:?}\nFTL one drive {one:?}\nFTL on RAIZN {rz:?}");
    for f in [z, one, rz] {
        assert!(
            f.seq_write > 0.0 && f.rand_write > 0.0 && f.rand_read > 0.0,
            "{f:?}"
        );
    }
    assert!(
        z.rand_write > one.rand_write,
        "{z:?} against one drive {one:?}"
    );
    assert!(z.rand_write > rz.rand_write, "{z:?} against RAIZN {rz:?}");
    assert_eq!(run(System::ZapRaid), z, "virtual time repeats");
}
