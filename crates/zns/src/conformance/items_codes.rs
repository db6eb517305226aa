//! Checklist items 43 and 44: status code values as the device returns them, and the
//! reference defaults for the append and copy limits.

use super::check::{Ck, KitResult};
use super::geometries::{
    kit_geometry, reference_geometry, REFERENCE_COPY_MAX_BLOCKS, REFERENCE_COPY_MAX_RANGES,
    REFERENCE_COPY_MAX_RANGE_BLOCKS, REFERENCE_ZASL_BYTES,
};
use super::pattern::pattern;
use super::DeviceFactory;
use crate::device::ZonedDevice;
use crate::status::{NvmeResult, NvmeStatus as E};
use crate::types::{CopyRange, ZoneAction as A, ZoneState as S};

pub(super) async fn run<F: DeviceFactory>(f: &F, item: u32) -> KitResult {
    match item {
        43 => status_codes(f).await,
        _ => reference_defaults(f).await,
    }
}

/// (status, SCT, SC, name) as the specifications give them.
const CODES: [(E, u8, u8, &str); 11] = [
    (E::ZoneBoundaryError, 1, 0xB8, "Zone Boundary Error"),
    (E::ZoneIsFull, 1, 0xB9, "Zone Is Full"),
    (E::ZoneIsReadOnly, 1, 0xBA, "Zone Is Read Only"),
    (E::ZoneIsOffline, 1, 0xBB, "Zone Is Offline"),
    (E::ZoneInvalidWrite, 1, 0xBC, "Zone Invalid Write"),
    (E::TooManyActiveZones, 1, 0xBD, "Too Many Active Zones"),
    (E::TooManyOpenZones, 1, 0xBE, "Too Many Open Zones"),
    (
        E::InvalidZoneStateTransition,
        1,
        0xBF,
        "Invalid Zone State Transition",
    ),
    (E::InvalidField, 0, 0x02, "Invalid Field"),
    (E::LbaOutOfRange, 0, 0x80, "LBA Out of Range"),
    (
        E::CommandSizeLimitExceeded,
        1,
        0x83,
        "Command Size Limit Exceeded",
    ),
];

/// The status a command returned must be `want`, with the specification's code and name.
fn expect_code<T: std::fmt::Debug>(ck: &Ck, what: &str, got: NvmeResult<T>, want: E) -> KitResult {
    let (_, sct, sc, name) = CODES
        .iter()
        .copied()
        .find(|c| c.0 == want)
        .ok_or_else(|| ck.fail("status not in the table"))?;
    ck.err(what, got, want)?;
    ck.eq(
        &format!("{what}: status code"),
        want.code(),
        (u16::from(sct) << 8) | u16::from(sc),
    )?;
    ck.eq(
        &format!("{what}: status name"),
        want.to_string().as_str(),
        name,
    )
}

async fn status_codes<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&kit_geometry());
    let ck = Ck::new(43, g);
    for (s, sct, sc, name) in CODES {
        ck.eq(&format!("SCT of {name}"), s.sct(), sct)?;
        ck.eq(&format!("SC of {name}"), s.sc(), sc)?;
        ck.eq(
            &format!("{name} looked up by code"),
            E::from_code(s.code()),
            Some(s),
        )?;
        ck.eq(&format!("name of {s:?}"), s.to_string().as_str(), name)?;
    }
    let dev = f.create(&g).await;
    let zs = |z| ck.zslba(z);
    let wr = |lba: u64, n: u64| {
        let (d, m) = pattern(&g, lba, n, 0);
        let dev = &dev;
        async move { dev.write(lba, &d, Some(&m), false).await }
    };
    ck.fill(&dev, 0, 44).await?;
    expect_code(
        &ck,
        "write past capacity",
        wr(zs(0) + 44, 8).await,
        E::ZoneBoundaryError,
    )?;
    expect_code(
        &ck,
        "write away from the WP",
        wr(zs(0) + 45, 1).await,
        E::ZoneInvalidWrite,
    )?;
    ck.fill(&dev, 1, g.zone_capacity).await?;
    expect_code(
        &ck,
        "write to a full zone",
        wr(zs(1) + 48, 1).await,
        E::ZoneIsFull,
    )?;
    f.set_zone_state(&dev, 2, S::ReadOnly).await;
    expect_code(
        &ck,
        "write to a read only zone",
        wr(zs(2), 1).await,
        E::ZoneIsReadOnly,
    )?;
    f.set_zone_state(&dev, 3, S::Offline).await;
    let mut buf = vec![0u8; g.block_size as usize];
    expect_code(
        &ck,
        "read of an offline zone",
        dev.read(zs(3), &mut buf, None).await,
        E::ZoneIsOffline,
    )?;
    let r = dev.zone_mgmt(A::Close, zs(4), false).await;
    expect_code(
        &ck,
        "close of an empty zone",
        r,
        E::InvalidZoneStateTransition,
    )?;
    let (d, m) = pattern(&g, 0, 1, 0);
    let r = dev.append(zs(4) + 1, &d, Some(&m), false).await;
    expect_code(&ck, "append not at a zone start", r, E::InvalidField)?;
    let r = dev.read(g.total_blocks(), &mut buf, None).await;
    expect_code(&ck, "read beyond the namespace", r, E::LbaOutOfRange)?;
    let ranges = vec![
        CopyRange {
            lba: zs(1),
            blocks: 1
        };
        g.copy_max_ranges as usize + 1
    ];
    let r = dev.copy(&ranges, zs(4), false).await;
    expect_code(
        &ck,
        "copy over the range limit",
        r,
        E::CommandSizeLimitExceeded,
    )?;
    for z in [4, 5, 0] {
        ck.mgmt(&dev, A::Open, z).await?;
    }
    let r = dev.zone_mgmt(A::Open, zs(6), false).await;
    expect_code(&ck, "open beyond the open limit", r, E::TooManyOpenZones)?;
    ck.mgmt(&dev, A::Close, 4).await?;
    ck.mgmt(&dev, A::Open, 6).await?;
    ck.mgmt(&dev, A::Close, 6).await?;
    let r = dev.zone_mgmt(A::Open, zs(7), false).await;
    expect_code(
        &ck,
        "open beyond the active limit",
        r,
        E::TooManyActiveZones,
    )
}

async fn reference_defaults<F: DeviceFactory>(f: &F) -> KitResult {
    let g = f.geometry_for(&reference_geometry());
    let ck = Ck::new(44, g);
    ck.eq(
        "reference append limit in bytes",
        g.zasl_blocks * g.block_size,
        512 * 1024,
    )?;
    ck.eq("REFERENCE_ZASL_BYTES", REFERENCE_ZASL_BYTES, 512 * 1024)?;
    let copy = (
        REFERENCE_COPY_MAX_RANGES,
        REFERENCE_COPY_MAX_RANGE_BLOCKS,
        REFERENCE_COPY_MAX_BLOCKS,
    );
    ck.eq("reference copy limits constants", copy, (128, 128, 128))?;
    ck.eq(
        "reference copy limits",
        (
            g.copy_max_ranges,
            g.copy_max_range_blocks,
            g.copy_max_blocks,
        ),
        (128, 128, 128),
    )?;
    let dev = f.create(&g).await;
    let got = dev.geometry();
    ck.eq(
        "device append limit in bytes",
        got.zasl_blocks * got.block_size,
        512 * 1024,
    )?;
    let got_copy = (
        got.copy_max_ranges,
        got.copy_max_range_blocks,
        got.copy_max_blocks,
    );
    ck.eq("device copy limits", got_copy, (128, 128, 128))?;
    // The limits hold in behaviour, on both sides of each boundary.
    let zasl = u64::from(got.zasl_blocks);
    let (zs0, zs1, zs2) = (ck.zslba(0), ck.zslba(1), ck.zslba(2));
    ck.write(&dev, zs0, 128).await?;
    let (d, m) = pattern(&g, 1, zasl, 44);
    ck.ok(
        "append at the append limit",
        dev.append(zs1, &d, Some(&m), false).await,
    )?;
    let (d, m) = pattern(&g, 1, zasl + 1, 44);
    let r = dev.append(zs2, &d, Some(&m), false).await;
    ck.err("append one block over the append limit", r, E::InvalidField)?;
    let one = |i: u64| CopyRange {
        lba: zs0 + i,
        blocks: 1,
    };
    let ranges: Vec<CopyRange> = (0..128).map(one).collect();
    ck.ok("copy of 128 ranges", dev.copy(&ranges, zs2, false).await)?;
    ck.expect_zone(&dev, 2, S::ImplicitlyOpened, 128).await?;
    let (d, m) = pattern(&g, zs0, 128, 0);
    ck.expect_content(&dev, zs2, &d, &m).await?;
    let dest = ck.zslba(3);
    let too_many: Vec<CopyRange> = (0..129).map(|i| one(i % 128)).collect();
    let cases = [
        ("copy of 129 ranges", too_many),
        (
            "copy of one 129-block range",
            vec![CopyRange {
                lba: zs0,
                blocks: 129,
            }],
        ),
        (
            "copy of 129 blocks in two ranges",
            vec![
                CopyRange {
                    lba: zs0,
                    blocks: 64,
                },
                CopyRange {
                    lba: zs0,
                    blocks: 65,
                },
            ],
        ),
    ];
    for (what, ranges) in cases {
        ck.err(
            what,
            dev.copy(&ranges, dest, false).await,
            E::CommandSizeLimitExceeded,
        )?;
    }
    ck.ok(
        "copy of one 128-block range",
        dev.copy(
            &[CopyRange {
                lba: zs0,
                blocks: 128,
            }],
            dest,
            false,
        )
        .await,
    )?;
    ck.expect_zone(&dev, 3, S::ImplicitlyOpened, 128).await
}
