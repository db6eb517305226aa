//! Settling a member's swap zone at open, before any metadata is written.
//!
//! A collection (of the general zone or of the partial-parity log) writes the complete new
//! image to the swap zone and flushes it, then resets its home zone (general or log) and
//! writes the image again there, flushes, and resets the swap zone. A power cut after the
//! home zone's reset leaves the swap zone holding the only complete image. Open reads the
//! union of both zones, but every collection starts by resetting the swap zone, and open
//! itself collects (it rewrites every log, then checkpoints every general zone): a second
//! cut in that rewrite, after its swap reset, lost everything the first cut had left only
//! in the swap zone (records, relocated data, a general checkpoint and its superblock).
//!
//! So open first settles every member's swap zone: when the home zone's valid image is a
//! strict prefix of the swap zone's (nothing, or the start of the same image, since both
//! copies are written block for block alike), the swap zone is the only complete image and
//! is copied home (home reset, written, flushed; then the swap zone reset). Otherwise the
//! home zone is complete (the cut came before its reset) and the swap zone may go. Every
//! step leaves a complete image in one zone: a cut while copying leaves the home a prefix
//! again, which the next open settles the same way.
//!
//! A collection that fails at run time after its home zone's reset (an error that does not
//! fail the member) leaves the same state while the volume runs on, and the next collection
//! on that member would start by resetting the swap zone; so such a failure marks the
//! member's swap zone unsettled, and the next collection settles it first (`settle_first`).

use zns::{NvmeResult, ReportFilter, ZoneAction, ZoneState, ZonedDevice};

use crate::layout::{GENERAL_ZONE, PARTIAL_PARITY_ZONE, SWAP_ZONE};
use crate::meta::{self, RecordType};

/// The valid image of a metadata zone: its whole records from the zone start, data and
/// metadata, up to the first block that does not start a whole record.
struct Image {
    data: Vec<u8>,
    meta: Vec<u8>,
    blocks: u64,
    /// The first record's type, if any.
    kind: Option<RecordType>,
}

async fn image(dev: &dyn ZonedDevice, zone: u32) -> NvmeResult<Image> {
    let g = dev.geometry();
    let start = g.zone_start(zone);
    let r = dev.report_zones(start, ReportFilter::All, false, 1).await?;
    let wp = match r.zones.first() {
        Some(z) if z.state == ZoneState::Full => g.zone_capacity,
        Some(z) => z.wp.saturating_sub(start).min(g.zone_capacity),
        None => 0,
    };
    let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
    let (mut data, mut md) = super::read_run(dev, start, wp).await?;
    let mut at = 0u64;
    let mut kind = None;
    while at < wp {
        let a = at as usize;
        let Ok((h, _)) = meta::decode_record(&data[a * bs..(a + 1) * bs]) else {
            break;
        };
        let bulk = u64::from(h.bulk_blocks);
        if at + 1 + bulk > wp {
            break;
        }
        if bulk > 0 {
            let (b0, b1) = (a + 1, a + 1 + bulk as usize);
            if meta::bulk_crc(&data[b0 * bs..b1 * bs], &md[b0 * oob..b1 * oob]) != h.bulk_crc {
                break;
            }
        }
        kind.get_or_insert(h.kind);
        at += 1 + bulk;
    }
    data.truncate(at as usize * bs);
    md.truncate(at as usize * oob);
    Ok(Image {
        data,
        meta: md,
        blocks: at,
        kind,
    })
}

/// Settles `dev`'s swap zone (above): returns whether its image was copied home.
pub(super) async fn settle_swap(dev: &dyn ZonedDevice) -> NvmeResult<bool> {
    let swap = image(dev, SWAP_ZONE).await?;
    let home_zone = match swap.kind {
        None => return Ok(false),
        Some(RecordType::PartialParity | RecordType::Relocated) => PARTIAL_PARITY_ZONE,
        Some(_) => GENERAL_ZONE,
    };
    let home = image(dev, home_zone).await?;
    let g = dev.geometry();
    let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
    let prefix = home.blocks < swap.blocks
        && swap.data[..home.data.len()] == home.data[..]
        && swap.meta[..home.meta.len()] == home.meta[..];
    if !prefix {
        return Ok(false);
    }
    let start = g.zone_start(home_zone);
    dev.zone_mgmt(ZoneAction::Reset, start, false).await?;
    let mdts = u64::from(g.mdts_blocks).max(1);
    let mut done = 0u64;
    while done < swap.blocks {
        let n = mdts.min(swap.blocks - done);
        let (a, b) = (done as usize, (done + n) as usize);
        let m = (oob > 0).then(|| &swap.meta[a * oob..b * oob]);
        dev.write(start + done, &swap.data[a * bs..b * bs], m, false)
            .await?;
        done += n;
    }
    dev.flush().await?;
    dev.zone_mgmt(ZoneAction::Reset, g.zone_start(SWAP_ZONE), false)
        .await?;
    Ok(true)
}

/// At run time, before a collection resets `dev`'s swap zone: when an earlier collection
/// failed after its home zone's reset (`unsettled`, the member's swap lock), the swap zone
/// may hold the only whole image, so it is settled as open settles it. A failure leaves
/// `unsettled` set, and the collection fails with it.
pub(super) async fn settle_first(dev: &dyn ZonedDevice, unsettled: &mut bool) -> NvmeResult<()> {
    if *unsettled {
        if settle_swap(dev).await? {
            tracing::info!("completed a collection cut by an error");
        }
        *unsettled = false;
    }
    Ok(())
}
