//! `zonestack raizn status` and `raizn check`: a RAIZN array inspected read-only from its
//! member images, without opening the volume (an open recovers the array and rewrites its
//! partial-parity logs, so it writes).
//!
//! Fault model: a member may be absent (`missing`), recorded failed by the others, stale
//! (an older superblock generation than the newest, as after a power cut while a failure
//! was being recorded), or not a member of this array at all; any of its zones may be Read
//! Only or Offline; its data may disagree with the parity (a torn or corrupted stripe).
//! Status reports each of these; check verifies the parity (XOR; Reed-Solomon with two parity units) (data and per-block metadata)
//! of every stripe all members hold in full and names each stripe that does not add up.
//! Incomplete stripes are protected by the partial-parity log, which only an open replays:
//! they are counted, not verified. With members absent or failed (at most the parity count)
//! the array is degraded, which check says without calling it a problem: it reads every
//! complete stripe's surviving units (each must read) and, while a parity unit per stripe
//! is left beyond the lost ones (m = 2, one member lost), checks that they are one codeword.
//! More members lost than the parity covers is a failed array: said, nothing verified.

use std::io::Write;
use std::path::PathBuf;

use raizn::layout::{ArrayLayout, GENERAL_ZONE, SWAP_ZONE};
use raizn::Superblock;
use serde_json::json;
use zns::{Geometry, ReportFilter, ZoneDescriptor, ZoneState, ZonedDevice};

use crate::cmd_raizn::uuid_text;
use crate::error::{CliError, CliResult};
use crate::members::{finish, Members};
use crate::units::format_size;

/// Member `dev`'s current superblock: the decodable one with the highest generation in its
/// general zone; None when the first block is not a superblock (not a RAIZN member). The
/// same rule as the volume's open (docs/FORMAT.md, "Superblock").
pub async fn newest_superblock(dev: &dyn ZonedDevice) -> Result<Option<Superblock>, CliError> {
    let g = dev.geometry();
    let mut block = vec![0u8; g.block_size as usize];
    let mut best: Option<Superblock> = None;
    // The general zone holds superblocks among other records (zone log, generations); while
    // it is compacted, the swap zone holds its copy. Every valid superblock counts; other
    // records and torn blocks are passed over.
    for zone in [GENERAL_ZONE, SWAP_ZONE] {
        let start = g.zone_start(zone);
        let r = dev.report_zones(start, ReportFilter::All, false, 1).await?;
        let wp = match r.zones.first() {
            Some(z) if z.start == start => z.wp.saturating_sub(start).min(g.zone_capacity),
            _ => continue,
        };
        for b in 0..wp {
            dev.read(start + b, &mut block, None).await?;
            if let Ok(sb) = Superblock::decode(&block) {
                if best.is_none_or(|o| o.generation < sb.generation) {
                    best = Some(sb);
                }
            }
        }
    }
    Ok(best)
}

/// What the members' superblocks say about the array.
struct Census {
    sbs: Vec<Option<Superblock>>,
    /// The newest superblock of any member: the array's settings.
    newest: Superblock,
    /// The state of every member: ok, failed, absent, stale, or not a member (with why).
    states: Vec<String>,
    /// Members whose data cannot be used: absent, failed, not a member.
    lost: Vec<usize>,
}

async fn census(m: &Members) -> Result<Census, CliError> {
    let mut sbs = Vec::new();
    for d in &m.devs {
        sbs.push(match d {
            Some(d) => newest_superblock(d.as_ref()).await?,
            None => None,
        });
    }
    let newest = sbs
        .iter()
        .flatten()
        .max_by_key(|sb| sb.generation)
        .copied()
        .ok_or_else(|| {
            CliError::Other(
                "no member holds a RAIZN superblock; create an array with `zonestack raizn create`"
                    .into(),
            )
        })?;
    let failed: Vec<usize> = sbs
        .iter()
        .flatten()
        .filter(|sb| sb.array_uuid == newest.array_uuid)
        .flat_map(|sb| [sb.failed_member, sb.second_failed_member])
        .flatten()
        .map(|f| f as usize)
        .collect();
    let mut states = Vec::new();
    let mut lost = Vec::new();
    for (i, (d, sb)) in m.devs.iter().zip(&sbs).enumerate() {
        let state = match (d, sb) {
            (None, _) => "absent".to_string(),
            (Some(_), None) => "not a member: no RAIZN superblock".to_string(),
            (Some(d), Some(sb)) => member_state(i, sb, &newest, m.devs.len(), &d.geometry()),
        };
        let state = match state.as_str() {
            "ok" | "stale" if failed.contains(&i) => "failed".to_string(),
            _ => state,
        };
        if !matches!(state.as_str(), "ok" | "stale") {
            lost.push(i);
        }
        states.push(state);
    }
    Ok(Census {
        sbs,
        newest,
        states,
        lost,
    })
}

/// One present member's state from its superblock against the newest one.
fn member_state(i: usize, sb: &Superblock, f: &Superblock, n: usize, geo: &Geometry) -> String {
    let why = if sb.array_uuid != f.array_uuid {
        Some(format!("it belongs to array {}", uuid_text(&sb.array_uuid)))
    } else if sb.member_index as usize != i {
        Some(format!(
            "it is member {} but was given at position {i}",
            sb.member_index
        ))
    } else if sb.members as usize != n {
        Some(format!(
            "its array has {} members, {n} were given",
            sb.members
        ))
    } else if sb.member_geometry != *geo {
        Some("the image's geometry differs from the array's".into())
    } else {
        None
    };
    match why {
        Some(w) => format!("not a member: {w}"),
        None if sb.generation < f.generation => "stale".into(),
        None => "ok".into(),
    }
}

fn layout_of(c: &Census) -> Result<ArrayLayout, CliError> {
    let g = c.newest.member_geometry;
    let geos = vec![g; c.newest.members as usize];
    let su_bytes = u64::from(c.newest.su_blocks) * u64::from(g.block_size);
    ArrayLayout::new(&geos, c.newest.parity, su_bytes)
        .and_then(|l| l.with_log_zones(c.newest.meta_zones.saturating_sub(2)))
        .map_err(|e| CliError::Other(e.to_string()))
}

/// Every member's zone descriptors (None for a lost member).
async fn member_zones(
    m: &Members,
    c: &Census,
) -> Result<Vec<Option<Vec<ZoneDescriptor>>>, CliError> {
    let mut all = Vec::new();
    for (i, d) in m.devs.iter().enumerate() {
        match d {
            Some(d) if !c.lost.contains(&i) => {
                let r = d
                    .report_zones(0, ReportFilter::All, false, usize::MAX)
                    .await?;
                all.push(Some(r.zones));
            }
            _ => all.push(None),
        }
    }
    Ok(all)
}

/// Blocks member zone `d` holds from its start (a Full zone holds its whole capacity; what a
/// Finish did not write reads as zeros).
fn held(d: &ZoneDescriptor) -> u64 {
    match d.state {
        ZoneState::Full => d.capacity,
        _ => d.wp.saturating_sub(d.start),
    }
}

/// One logical zone as its members show it: a state name and the readable write pointer.
fn zone_summary(l: &ArrayLayout, descs: &[Option<&ZoneDescriptor>]) -> (&'static str, u64) {
    let live: Vec<&ZoneDescriptor> = descs.iter().flatten().copied().collect();
    let has = |s: ZoneState| live.iter().any(|d| d.state == s);
    // A lost member's units are rebuilt from parity: it does not shorten the prefix.
    let cap = l.member_geometry().zone_capacity;
    let wps: Vec<u64> = descs.iter().map(|d| d.map_or(cap, held)).collect();
    let wp = l.readable_prefix(&wps);
    let state = if has(ZoneState::Offline) {
        "offline"
    } else if has(ZoneState::ReadOnly) {
        "read_only"
    } else if live.iter().all(|d| d.state == ZoneState::Empty) {
        "empty"
    } else if live.iter().all(|d| d.state == ZoneState::Full) {
        "full"
    } else if live.iter().any(|d| d.state.is_open()) {
        "open"
    } else {
        "closed"
    };
    let wp = if state == "empty" { 0 } else { wp };
    (state, wp)
}

/// Prints the array's status; exits with an error naming every image given that is not a
/// member of the array (another array's, none, or at the wrong position), after the report.
pub async fn status(paths: &[PathBuf], json_out: bool, out: &mut impl Write) -> CliResult {
    let m = Members::open(paths, true, true)?;
    let r = status_text(&m, json_out).await;
    let (text, strangers) = finish(m, r)?;
    writeln!(out, "{text}")?;
    match strangers.is_empty() {
        true => Ok(()),
        false => Err(CliError::Other(strangers.join("; "))),
    }
}

/// Why each present image is not a member, named by its image (`member I (path): ...`).
fn strangers(m: &Members, c: &Census) -> Vec<String> {
    c.states
        .iter()
        .enumerate()
        .filter(|(_, s)| s.starts_with("not a member"))
        .map(|(i, s)| format!("{}: {s}", m.name(i)))
        .collect()
}

async fn status_text(m: &Members, json_out: bool) -> Result<(String, Vec<String>), CliError> {
    let c = census(m).await?;
    let strangers = strangers(m, &c);
    let l = layout_of(&c)?;
    let g = l.logical_geometry();
    let zones = member_zones(m, &c).await?;
    let mut rows = Vec::new();
    for z in 0..g.zone_count {
        let pz = (z + l.meta_zones()) as usize;
        let descs: Vec<Option<&ZoneDescriptor>> = zones
            .iter()
            .map(|d| d.as_ref().and_then(|d| d.get(pz)))
            .collect();
        rows.push(zone_summary(&l, &descs));
    }
    let su_bytes = l.su_blocks() * u64::from(g.block_size);
    let degraded = match c.lost.len() {
        0 => "optimal",
        n if n <= l.parity() as usize => "degraded",
        _ => "failed",
    };
    if json_out {
        let members: Vec<_> = (0..m.paths.len())
            .map(|i| {
                json!({"position": i, "path": m.paths[i].display().to_string(),
                    "state": c.states[i],
                    "generation": c.sbs[i].map(|s| s.generation)})
            })
            .collect();
        let zs: Vec<_> = rows
            .iter()
            .enumerate()
            .map(|(z, (s, wp))| json!({"zone": z, "state": s, "wp": wp}))
            .collect();
        let v = json!({
            "uuid": uuid_text(&c.newest.array_uuid), "state": degraded,
            "members": members, "parity": l.parity(), "stripe_unit": su_bytes,
            "log_zones": l.log_zones(),
            "zones": g.zone_count, "zone_size": g.zone_size, "zone_capacity": g.zone_capacity,
            "block_size": g.block_size, "capacity_bytes": g.capacity_bytes(),
            "max_open": g.max_open, "max_active": g.max_active,
            "superblock_generation": c.newest.generation, "zone_states": zs,
        });
        return Ok((v.to_string(), strangers));
    }
    let mut t = format!(
        "array:          {} ({degraded})\n",
        uuid_text(&c.newest.array_uuid)
    );
    for (i, s) in c.states.iter().enumerate() {
        t += &format!("member {i}:       {} {s}\n", m.paths[i].display());
    }
    t += &format!(
        "geometry:       {} zones of {} blocks ({} writable), {}-byte blocks\n",
        g.zone_count, g.zone_size, g.zone_capacity, g.block_size
    );
    t += &format!(
        "capacity:       {} ({} data + {} parity per stripe)\n",
        format_size(g.capacity_bytes()),
        l.data_units(),
        l.parity()
    );
    t += &format!(
        "stripe unit:    {}\nlog zones:      {} per member\nlimits:         {} open / {} active zones (0: unlimited)\n",
        format_size(su_bytes),
        l.log_zones(),
        g.max_open,
        g.max_active
    );
    t += &zone_lines(&rows);
    Ok((t.trim_end().to_string(), strangers))
}

/// The zone summary: a count per state, then every zone that is not Empty.
fn zone_lines(rows: &[(&'static str, u64)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (s, _) in rows {
        match counts.iter_mut().find(|(n, _)| n == s) {
            Some(c) => c.1 += 1,
            None => counts.push((s, 1)),
        }
    }
    let c: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let mut t = format!("zones:          {}\n", c.join(", "));
    for (z, (s, wp)) in rows.iter().enumerate().filter(|(_, (s, _))| *s != "empty") {
        t += &format!("  zone {z}: {s}, wp {wp}\n");
    }
    t
}

pub async fn check(paths: &[PathBuf], out: &mut impl Write) -> CliResult {
    let m = Members::open(paths, true, true)?;
    let r = check_members(&m, out).await;
    finish(m, r)
}

/// What check found.
#[derive(Default)]
struct Findings {
    /// Complete stripes whose units were checked against each other.
    verified: u64,
    /// Complete stripes read in full from the survivors, with no redundancy left to check
    /// them against (as many members lost as parity units).
    read_only: u64,
    incomplete: u64,
    problems: Vec<String>,
}

async fn check_members(m: &Members, out: &mut impl Write) -> CliResult {
    let c = census(m).await?;
    let l = layout_of(&c)?;
    let parity = l.parity() as usize;
    let mut f = Findings::default();
    let mut degraded = Vec::new();
    for (i, s) in c.states.iter().enumerate() {
        match s.as_str() {
            "ok" => {}
            // A member the array lost within its parity's reach is the degraded state the
            // array was built to run in: said, not a problem.
            "absent" | "failed" if c.lost.len() <= parity => {
                degraded.push(format!("{} {s}", m.name(i)))
            }
            _ => f.problems.push(format!("{}: {s}", m.name(i))),
        }
    }
    if c.lost.len() > parity {
        writeln!(
            out,
            "array failed: {} member(s) lost, more than the {parity} parity unit(s) per stripe cover; nothing verified",
            c.lost.len()
        )?;
    } else {
        if !degraded.is_empty() {
            let left = parity - c.lost.len();
            writeln!(
                out,
                "degraded: {}; {}",
                degraded.join(", "),
                match left {
                    0 => "no redundancy is left, so complete stripes are read from the survivors (every unit must read) but their parity cannot be verified"
                        .to_string(),
                    n => format!("{n} parity unit(s) per stripe left to verify the survivors against"),
                }
            )?;
        }
        let zones = member_zones(m, &c).await?;
        for z in 0..l.logical_geometry().zone_count {
            check_zone(m, &l, &zones, z, &mut f).await?;
        }
    }
    for p in &f.problems {
        writeln!(out, "problem: {p}")?;
    }
    let mut summary = format!("{} complete stripes verified", f.verified);
    if f.read_only > 0 {
        summary += &format!(
            ", {} complete stripes read without redundancy to verify them",
            f.read_only
        );
    }
    summary += &format!(
        ", {} incomplete stripes (protected by partial parity) not checked",
        f.incomplete
    );
    if f.problems.is_empty() && c.lost.len() <= parity {
        let head = if degraded.is_empty() {
            "clean"
        } else {
            "clean (degraded)"
        };
        writeln!(out, "{head}: {summary}")?;
        return Ok(());
    }
    let n = f.problems.len() + usize::from(c.lost.len() > parity);
    Err(CliError::Other(format!(
        "array {}: {n} {}; {summary}",
        uuid_text(&c.newest.array_uuid),
        if n == 1 { "problem" } else { "problems" }
    )))
}

/// Verifies the parity of every stripe of logical zone `z` that every member still in the
/// array holds in full (a lost member, None in `zones`, holds nothing to verify).
async fn check_zone(
    m: &Members,
    l: &ArrayLayout,
    zones: &[Option<Vec<ZoneDescriptor>>],
    z: u32,
    f: &mut Findings,
) -> CliResult {
    let pz = (z + l.meta_zones()) as usize;
    let su = l.su_blocks();
    let mut least = u64::MAX;
    let mut most = 0;
    let mut present = Vec::new();
    for (i, d) in zones.iter().enumerate() {
        let Some(d) = d else { continue };
        let Some(d) = d.get(pz) else {
            return Err(CliError::Other(format!(
                "{} reports no zone {pz}",
                m.name(i)
            )));
        };
        if matches!(d.state, ZoneState::Offline) {
            f.problems
                .push(format!("zone {z}: the zone of {} is offline", m.name(i)));
            return Ok(());
        }
        least = least.min(held(d));
        most = most.max(held(d));
        present.push(i);
    }
    if present.is_empty() {
        return Ok(());
    }
    let complete = least / su;
    f.incomplete += most.div_ceil(su) - complete;
    let redundant = present.len() > l.data_units() as usize;
    for s in 0..complete {
        match stripe_adds_up(m, l, &present, z, s).await? {
            Some(true) => f.verified += 1,
            None => f.read_only += 1,
            Some(false) => {
                let on = (0..l.members())
                    .filter(|i| l.code_position(s, *i) >= l.data_units() as usize)
                    .map(|i| m.name(i))
                    .collect::<Vec<_>>()
                    .join(" and ");
                let what = if redundant && present.len() < l.members() {
                    "the surviving units do not agree with each other"
                } else {
                    "does not match the data"
                };
                f.problems
                    .push(format!("zone {z} stripe {s}: parity (on {on}) {what}"));
                f.verified += 1;
            }
        }
    }
    Ok(())
}

/// Whether the units of stripe `s` that the `present` members hold are one codeword of the
/// stripe code (XOR with m = 1, Reed-Solomon with m = 2), data and per-block metadata
/// alike: with every member present, the parity units against the code of the data units;
/// with some lost, one present unit against its rebuild from the others. None when no more
/// than `D` units are present: they were read, but nothing is left to check them against.
async fn stripe_adds_up(
    m: &Members,
    l: &ArrayLayout,
    present: &[usize],
    z: u32,
    s: u64,
) -> Result<Option<bool>, CliError> {
    let g = l.member_geometry();
    let su = l.su_blocks() as usize;
    let (bs, oob) = (g.block_size as usize, g.oob_size as usize);
    let d = l.data_units() as usize;
    let lba = l.member_zone_start(z) + s * su as u64;
    // (code position, data, metadata) of every present member's unit.
    let mut units = Vec::with_capacity(present.len());
    for &i in present {
        let Some(dev) = m.devs.get(i).and_then(|d| d.as_ref()) else {
            return Err(CliError::Other(format!("{} cannot be read", m.name(i))));
        };
        let mut data = vec![0u8; su * bs];
        let mut md = vec![0u8; su * oob];
        let meta = (oob > 0).then_some(&mut md[..]);
        dev.read(lba, &mut data, meta).await.map_err(|e| {
            CliError::Other(format!("zone {z} stripe {s}: reading {}: {e}", m.name(i)))
        })?;
        units.push((l.code_position(s, i), data, md));
    }
    if units.len() <= d {
        return Ok(None);
    }
    let code = l.code();
    let bad = |e: raizn::code::CodeError| CliError::Other(format!("zone {z} stripe {s}: {e}"));
    units.sort_by_key(|u| u.0);
    if units.len() == l.members() {
        let data: Vec<&[u8]> = units[..d].iter().map(|(_, u, _)| &u[..]).collect();
        let meta: Vec<&[u8]> = units[..d].iter().map(|(_, _, u)| &u[..]).collect();
        let pd = code.encode(&data).map_err(bad)?;
        let pm = code.encode(&meta).map_err(bad)?;
        return Ok(Some(
            units[d..]
                .iter()
                .zip(pd.iter().zip(&pm))
                .all(|((_, ud, um), (p, q))| ud == p && um == q),
        ));
    }
    // Some unit is lost: `D` of the others determine the codeword, so the stripe adds up
    // when the last present unit is what those rebuild.
    let Some((last, rest)) = units.split_last() else {
        return Ok(None);
    };
    let have_d: Vec<(usize, &[u8])> = rest.iter().map(|(p, u, _)| (*p, &u[..])).collect();
    let have_m: Vec<(usize, &[u8])> = rest.iter().map(|(p, _, u)| (*p, &u[..])).collect();
    let rd = code.rebuild(&have_d, &[last.0]).map_err(bad)?;
    let rm = code.rebuild(&have_m, &[last.0]).map_err(bad)?;
    Ok(Some(
        rd.first().is_some_and(|u| *u == last.1) && rm.first().is_some_and(|u| *u == last.2),
    ))
}
