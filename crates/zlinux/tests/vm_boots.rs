//! The VM harness boots Debian's kernel with a QEMU NVMe ZNS namespace and a null_blk zoned
//! device, runs a script inside, and returns its output and exit status.

mod common;

#[test]
fn vm_boots_with_zoned_nvme_and_null_blk() {
    let started = std::time::Instant::now();
    let Some(run) = common::run_vm(
        &[
            "--ns",
            "zones=8,zone_size=1M,zone_capacity=768K,max_open=4,max_active=6",
            "--ns",
            "zones=4,zone_size=512K,lbs=512",
            "--nullblk",
            "size=64,blocksize=4096,zone_size=4,zone_capacity=3,zone_max_open=4,zone_max_active=6",
        ],
        "for d in nvme0n1 nvme0n2 nullb0; do echo \"$d $(cat /sys/block/$d/queue/zoned) \
         $(cat /sys/block/$d/queue/chunk_sectors) $(cat /sys/block/$d/queue/logical_block_size)\"; done\n\
         exit 7\n",
    ) else {
        return;
    };
    eprintln!(
        "boot, run and power-off took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // The guest's exit status is the harness's: 7 proves it is carried, not assumed.
    assert_eq!(
        run.status, 7,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    assert!(
        run.stdout.contains("nvme0n1 host-managed 2048 4096"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("nvme0n2 host-managed 1024 512"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("nullb0 host-managed 8192 4096"),
        "{}",
        run.stdout
    );
}
