//! A volume task that panics fails the volume with the panic's message. A stripe is written
//! by a task of its own; when a member's driver panicked inside it, the task ended without
//! completing the stripe, and every write waiting for that stripe (and every flush after it)
//! waited for ever: an NBD client of `serve --zapraid` hung, and so did the server's shutdown.
//!
//! Fault model: one member's N-th write command panics (a broken invariant in its driver).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{as_zoned, block, emu_members, opts, runtime};
use zapraid::{GroupMode, ZapRaidVolume};
use zns::{BlockDevice, Hook, Hooked, NvmeResult, OpKind, OpSet, ZoneAction, ZonedDevice};

/// Panics on the `nth` write or append once armed.
struct PanicAt {
    armed: Arc<AtomicBool>,
    nth: u64,
    seen: AtomicU64,
}

#[async_trait]
impl Hook for PanicAt {
    async fn before(&self, op: OpKind, _: Option<ZoneAction>) -> NvmeResult<()> {
        if self.armed.load(Ordering::SeqCst) && OpSet::WRITES.contains(op) {
            let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
            if n == self.nth {
                panic!("member driver invariant broken at write {n}");
            }
        }
        Ok(())
    }
}

#[test]
fn a_member_panicking_mid_stripe_fails_the_volume_with_its_message() {
    for nth in [1, 3] {
        // Four stripes: member 2 takes one block of each.
        runtime().block_on(async {
            let armed = Arc::new(AtomicBool::new(false));
            let emus = emu_members(4, 8, 70 + nth);
            let members: Vec<Arc<dyn ZonedDevice>> = as_zoned(&emus)
                .into_iter()
                .enumerate()
                .map(|(i, d)| match i {
                    2 => Arc::new(Hooked::new(
                        d,
                        PanicAt {
                            armed: armed.clone(),
                            nth,
                            seen: AtomicU64::new(0),
                        },
                    )) as Arc<dyn ZonedDevice>,
                    _ => d,
                })
                .collect();
            let vol = ZapRaidVolume::format(members, &opts(GroupMode::Grouped(4)))
                .await
                .expect("format");
            let bs = vol.block_size() as usize;
            armed.store(true, Ordering::SeqCst);
            let data: Vec<u8> = (0..12u64).flat_map(|l| block(bs, l, 1)).collect();
            // The paused clock runs ahead to the deadline if the write hangs.
            let w = tokio::time::timeout(Duration::from_secs(600), vol.write(0, &data, false))
                .await
                .unwrap_or_else(|_| panic!("nth {nth}: the write hung after the panic"));
            // The panicking command may belong to a stripe of the format's still in flight,
            // and this write's own stripes may land whole before the failure: it may succeed;
            // if it fails, it names the cause.
            if let Err(e) = w {
                assert!(
                    e.to_string()
                        .contains("panicked: member driver invariant broken"),
                    "nth {nth}: the cause must reach the caller: {e}"
                );
            }
            // The flush waits for every stripe in flight, the one whose task panicked too:
            // it fails with the panic's message, and so does every command after it.
            let f = tokio::time::timeout(Duration::from_secs(600), vol.flush())
                .await
                .unwrap_or_else(|_| panic!("nth {nth}: the flush hung"));
            let e = f.expect_err("a failed volume refuses a flush");
            assert!(
                e.to_string()
                    .contains("panicked: member driver invariant broken"),
                "nth {nth}: {e}"
            );
            let again = vol.write(100, &data[..bs], false).await;
            let e = again.expect_err("a failed volume refuses writes");
            assert!(e.to_string().contains("panicked"), "nth {nth}: {e}");
        });
    }
}
