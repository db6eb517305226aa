//! A write is acknowledged only when its whole stripe, data and parity, is on every member
//! (ZapRAID section 3.1): one member's writes and appends are held back at a gate, and no
//! client write or flush may complete until the gate opens, in every group mode.
//!
//! Fault model: none; the gate only delays commands, as a slow drive does.

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{as_zoned, block, emu_members, opts, runtime};
use tokio::sync::watch;
use zapraid::{GroupMode, ZapRaidVolume};
use zns::{
    BlockDevice, Hook, Hooked, NvmeResult, OpKind, OpSet, ReportFilter, ZoneAction, ZonedDevice,
};

/// The hook of a member (`Hooked`) whose writes, appends, write zeroes and copies wait until
/// the gate is open (a slow drive).
struct Gate {
    open: watch::Receiver<bool>,
}

#[async_trait]
impl Hook for Gate {
    async fn before(&self, op: OpKind, _: Option<ZoneAction>) -> NvmeResult<()> {
        if OpSet::WRITES.contains(op) {
            let mut open = self.open.clone();
            open.wait_for(|o| *o)
                .await
                .expect("the gate's sender lives as long as the test");
        }
        Ok(())
    }
}

/// Blocks written to `member`'s zones so far (the sum of its write pointers' advances).
async fn blocks_on(dev: &dyn ZonedDevice) -> u64 {
    let g = dev.geometry();
    let r = dev
        .report_zones(0, ReportFilter::All, false, g.zone_count as usize)
        .await
        .expect("report");
    r.zones.iter().map(|z| z.wp - z.start).sum()
}

#[test]
fn no_write_completes_before_its_stripe_is_on_every_member() {
    for mode in [
        GroupMode::Grouped(4),
        GroupMode::ZoneWriteOnly,
        GroupMode::ZoneAppendOnly,
    ] {
        for gated in 0..4usize {
            runtime().block_on(async {
                let what = format!("{mode:?}, member {gated} held back");
                let emus = emu_members(4, 8, 40 + gated as u64);
                let (tx, rx) = watch::channel(true);
                let members: Vec<Arc<dyn ZonedDevice>> = as_zoned(&emus)
                    .into_iter()
                    .enumerate()
                    .map(|(i, d)| match i == gated {
                        true => Arc::new(Hooked::new(d, Gate { open: rx.clone() }))
                            as Arc<dyn ZonedDevice>,
                        false => d,
                    })
                    .collect();
                let vol = ZapRaidVolume::format(members, &opts(mode))
                    .await
                    .expect("format");
                let bs = vol.block_size() as usize;
                // Some stripes first, so the segment is open and its header written.
                let first: Vec<u8> = (0..9u64).flat_map(|l| block(bs, l, 1)).collect();
                vol.write(0, &first, false).await.expect("first write");
                let before = blocks_on(emus[gated].as_ref()).await;
                tx.send_replace(false);
                // Two whole stripes and a partial one (padded by its timer), and a flush.
                let data: Vec<u8> = (20..27u64).flat_map(|l| block(bs, l, 2)).collect();
                let write = vol.write(20, &data, false);
                let one = block(bs, 40, 2);
                let fua = vol.write(40, &one, true);
                let flush = vol.flush();
                let all = async { futures::join!(write, fua, flush) };
                tokio::pin!(all);
                // Virtual time: a second is thousands of padding timeouts and device commands.
                let held = tokio::time::timeout(Duration::from_secs(1), &mut all).await;
                assert!(
                    held.is_err(),
                    "{what}: a command completed without its stripe"
                );
                let other = (gated + 1) % 4;
                assert!(
                    blocks_on(emus[other].as_ref()).await > blocks_on(emus[gated].as_ref()).await,
                    "{what}: the other members did not run ahead"
                );
                assert_eq!(blocks_on(emus[gated].as_ref()).await, before, "{what}");
                tx.send_replace(true);
                let (w, f, fl) = all.await;
                w.expect("write");
                f.expect("fua write");
                fl.expect("flush");
                // Now every member holds its block of each of those stripes: 7 + 1 blocks
                // make at least 3 stripes of 3.
                let held = blocks_on(emus[gated].as_ref()).await;
                assert!(held >= before + 3, "{what}: {before} -> {held}");
                let mut buf = vec![0u8; 7 * bs];
                vol.read(20, &mut buf).await.expect("read");
                assert_eq!(buf, data, "{what}");
            });
        }
    }
}
