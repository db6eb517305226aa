//! An imitation of ZNS+ (OSDI '21) varmail, the fsync-heavy workload of its Fig. 7(a) and
//! Table 5, on a block volume: not a reproduction of a figure. Filebench's varmail runs on
//! F2FS (28 KiB files, 16 threads, an fsync after each append, paper Table 3); here the host
//! FTL stands in for F2FS and 16 writers rewrite whole files of 16-40 KiB, each write
//! followed by a Flush (`znsplus_fig8::Workload::VarmailLike`). What it shares with varmail is
//! the shape the paper credits for PPA-ordered plugging's gain: small synchronous requests
//! that leave the flash chips idle between them (Table 5: 31.7% of varmail's copied blocks
//! were plugged in the background, 11.3% of fileserver's).
//!
//! The same device, FTL and five setups as `znsplus_fig8` (ZNS; IZC in source order, which
//! moves almost nothing by copyback; IZC copyback-aware (`znsplus_fig7` runs it with the
//! device's copyback off, Fig. 7(a)'s "IZC (w/o cpbk)"); ZNS+ with PPA-ordered plugging; ZNS+ with LBA-ordered plugging) at 80%
//! and 90% utilisation (90% is the paper's default). The paper prints no varmail throughput
//! we can read reliably (Fig. 7(a)'s labels do not say which bar they belong to), so the
//! rows compare what it does print for varmail, the background-plugging share (Table 5)
//! and the copyback ratio (section 4.1: 74%), and give the throughputs in their labels.

use crate::paper::{Options, Row};
use crate::znsplus_fig8::{measure_workload_host, Point, Setup, Workload, PROFILE, SHAPE};

/// The utilisations of the rows.
pub const UTILISATIONS: [u32; 2] = [80, 90];
/// Table 5: share of copied blocks plugged in the background (PP) under varmail.
pub const PAPER_BACKGROUND_PLUGGING: f64 = 0.317;
/// Section 4.1: share of in-storage copies that were copybacks under varmail.
pub const PAPER_COPYBACK_RATIO: f64 = 0.74;

/// Every setup at every utilisation.
pub fn points(o: &Options) -> Result<Vec<Point>, String> {
    let mut out = Vec::new();
    for u in UTILISATIONS {
        for s in Setup::ALL {
            let p = measure_workload_host(
                (o.profile.unwrap_or(PROFILE), s),
                Workload::VarmailLike,
                u,
                o.bytes_per_point,
                SHAPE,
                o.seed,
                o.host_copy_ns_per_block(),
            )?;
            out.push(p);
        }
    }
    Ok(out)
}

/// The rows of `points`: per utilisation, PP's background share and the copyback ratio
/// against the paper's varmail figures, with every setup's throughput in the labels.
pub fn rows_of(points: &[Point]) -> Vec<Row> {
    let mut rows = Vec::new();
    for u in UTILISATIONS {
        let at = |s: Setup| {
            points
                .iter()
                .find(|p| p.utilisation_pct == u && p.setup == s)
        };
        let (Some(zns), Some(cub), Some(cab), Some(pp), Some(lp)) = (
            at(Setup::Zns),
            at(Setup::IzcSourceOrder),
            at(Setup::IzcCopybackAware),
            at(Setup::ZnsPlus),
            at(Setup::ZnsPlusLp),
        ) else {
            continue;
        };
        rows.push(Row::new(
            format!(
                "znsplus-varmail (imitation) ZNS+ copied blocks plugged in idle chip time, {u}% utilisation (of plugged blocks {:.0}%; MiB/s: ZNS {:.1}, IZC source order {:.1}, IZC {:.1}, ZNS+ {:.1}, ZNS+ LP {:.1}; chip utilisation ZNS {:.0}%, IZC {:.0}%, ZNS+ {:.0}%, LP {:.0}%)",
                pp.plugged_idle_share * 100.0,
                zns.mib_per_sec,
                cub.mib_per_sec,
                cab.mib_per_sec,
                pp.mib_per_sec,
                lp.mib_per_sec,
                zns.chip_utilisation * 100.0,
                cab.chip_utilisation * 100.0,
                pp.chip_utilisation * 100.0,
                lp.chip_utilisation * 100.0,
            ),
            PAPER_BACKGROUND_PLUGGING,
            pp.copied_idle_share,
        ));
        rows.push(Row::new(
            format!(
                "znsplus-varmail (imitation) copyback ratio, copyback-aware IZC, {u}% utilisation (source order: {:.3}; WAF ZNS {:.2}, IZC {:.2}, ZNS+ {:.2}; ZNS+ plugged {:.2} per user block)",
                cub.copyback_ratio, zns.waf, cab.waf, pp.waf, pp.plugged_per_user
            ),
            PAPER_COPYBACK_RATIO,
            cab.copyback_ratio,
        ));
    }
    rows
}

/// The rows at 80% and 90% utilisation.
pub fn rows(o: &Options) -> Result<Vec<Row>, String> {
    Ok(rows_of(&points(o)?))
}
