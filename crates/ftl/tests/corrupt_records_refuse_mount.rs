//! A mount refuses records that are checksummed but impossible, with an error naming the
//! field, instead of panicking: an out-of-range L2P entry in the checkpoint and a block tag
//! whose sequence number cannot grow. The bytes are patched as docs/FORMAT.md lays them out
//! and their CRC-32C recomputed, so only field validation can catch them.

mod common;

use common::{block, fresh, geometry, runtime, small_opts};
use ftl::{checkpoint, FtlError, FtlVolume};
use zns::{BlockDevice, ReportFilter, ZoneState, ZonedDevice};

/// Header bytes before the checkpoint body (docs/FORMAT.md).
const HEADER: usize = 4096;

/// Reads the raw bytes of checkpoint slot 0 (its first zone is enough for this device).
async fn read_slot0(dev: &dyn ZonedDevice, layout: &ftl::Layout) -> Vec<u8> {
    let g = dev.geometry();
    let bs = g.block_size as usize;
    let step = u64::from(g.mdts_blocks);
    let mut out = Vec::new();
    let mut at = 0;
    while at < layout.zone_blocks {
        let n = step.min(layout.zone_blocks - at);
        let mut buf = vec![0u8; n as usize * bs];
        dev.read(layout.slot_zone_start(0, 0) + at, &mut buf, None)
            .await
            .expect("read slot");
        out.extend_from_slice(&buf);
        at += n;
    }
    out
}

// Regression: recovery used the checkpoint's L2P entries as indexes once the checksum held,
// so an entry beyond the data area panicked with an index out of bounds during mount.
#[test]
fn a_checkpoint_with_an_out_of_range_mapping_entry_is_refused() {
    runtime().block_on(async {
        let dev = common::device(geometry(), 3);
        ftl::format(dev.as_ref(), ftl::FormatOptions::with_op(580), 7, false)
            .await
            .expect("format");
        let layout = ftl::probe(dev.as_ref()).await.expect("probe");
        assert_eq!(layout.slot_zones, 1, "the test reads one slot zone");
        let mut bytes = read_slot0(dev.as_ref(), &layout).await;
        let body_len = u64::from_le_bytes(bytes[80..88].try_into().expect("8 bytes")) as usize;
        bytes.truncate(HEADER + body_len);
        // L2P entry of LBA 5, far beyond the data area; then both checksums again.
        let pba: u32 = 0xFFFF_0000;
        bytes[HEADER + 20..HEADER + 24].copy_from_slice(&pba.to_le_bytes());
        let body_crc = crc32c::crc32c(&bytes[HEADER..]);
        bytes[88..92].copy_from_slice(&body_crc.to_le_bytes());
        let header_crc = crc32c::crc32c(&bytes[..92]);
        bytes[92..96].copy_from_slice(&header_crc.to_le_bytes());
        checkpoint::write_slot(dev.as_ref(), &layout, 0, &bytes, false)
            .await
            .expect("write slot");

        let err = match FtlVolume::mount(dev.clone(), small_opts()).await {
            Ok(_) => panic!("a checkpoint mapping LBA 5 to block {pba} was accepted"),
            Err(e) => e,
        };
        assert!(
            matches!(err, FtlError::Checkpoint(checkpoint::CkptError::Corrupt(_))),
            "{err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("LBA 5") && msg.contains(&pba.to_string()) && msg.contains("slot 0"),
            "the error must name the slot, the LBA and the entry: {msg}"
        );
    });
}

// Regression: a data block's tag with sequence number 2^64-1 passed decoding, and recovery's
// `seq + 1` for the next sequence number overflowed (a panic in debug builds, a wrapped
// counter in release ones).
#[test]
fn a_block_tag_whose_sequence_number_cannot_grow_is_refused() {
    runtime().block_on(async {
        let dev = common::device(geometry(), 4);
        let vol = fresh(&dev, 580, small_opts()).await;
        let bs = vol.block_size() as usize;
        vol.write(0, &block(bs, 1), true).await.expect("write");
        vol.crash().await;
        drop(vol);
        // The zone that block went to is still open; append a block the FTL did not write,
        // tagged as LBA 1 with the largest sequence number.
        let layout = ftl::probe(dev.as_ref()).await.expect("probe");
        let report = dev
            .report_zones(
                layout.data_zone_start(0),
                ReportFilter::All,
                false,
                usize::MAX,
            )
            .await
            .expect("report");
        let open = report
            .zones
            .iter()
            .find(|z| z.wp > z.start + 1 && z.state != ZoneState::Full)
            .expect("a data zone holding the write");
        let mut meta = vec![0u8; dev.geometry().oob_size as usize];
        meta[..8].copy_from_slice(&1u64.to_le_bytes());
        meta[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        dev.write(open.wp, &block(bs, 2), Some(&meta), true)
            .await
            .expect("write a hostile block");

        let err = match FtlVolume::mount(dev.clone(), small_opts()).await {
            Ok(_) => panic!("a tag with sequence number 2^64-1 was accepted"),
            Err(e) => e,
        };
        assert!(matches!(err, FtlError::Corrupt(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("sequence number") && msg.contains(&u64::MAX.to_string()),
            "the error must name the field and its value: {msg}"
        );
    });
}
