//! Power cuts with client I/O in flight: each round starts a batch of concurrent commands
//! (single- and multi-block writes, FUA writes, trims, write zeroes) on disjoint LBAs of a
//! ZapRAID volume whose members are emulated drives behind `FaultyZoned`, and in some rounds
//! cuts power on every member at a seeded instant, so stripes are partly appended, barriers
//! half written (landed on some members and not others: counted and asserted), and commands submitted but not executed or executed but not acknowledged.
//! Each member then loses its unflushed writes (a seeded prefix of every zone survives) and
//! the array is opened again. Every FUA write and every write completed before a completed
//! flush must read back, nothing older than that, and a write in flight or unflushed reads
//! as its old or new version, per block. In some schedules one member dies (every command
//! fails, Namespace Not Ready) before a round: the volume goes on degraded, power cuts find
//! stripes omitting it and its failure being recorded, and the member comes back stale at a
//! later open (or stays away): it must stay failed once recorded and never bring back old
//! blocks. In the recovery schedules a member also dies at the instant of a cut (the open
//! finds it gone), and recoveries onto a spare run alongside the batches, so cuts fall inside
//! recoveries and later rounds recover again onto a spare holding a partial rebuild. Three
//! tests run 1,100 schedules in all, each asserting how much it exercised. One schedule in
//! four runs on members without per-block metadata, so the array keeps its records in-band
//! (group summaries; docs/DESIGN.md, "In-band records") and the open finds the open
//! segment's records in the summaries that power loss left.
//! A failing schedule prints its seed; rerun it alone with `ZAPRAID_CUT_SEED=<seed>`, and add
//! `ZAPRAID_CUT_TRACE=1` to print each round's commands, flushes and cuts. Every schedule keeps
//! a record of its events (commands, completions, cuts, what each block read back, the
//! volume's counters), and a test runs seeds twice and asserts the records are identical.

mod common;

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use common::{block, emu_members, emu_members_without_metadata, runtime};
use emu::EmuDevice;
use futures::future::{join_all, LocalBoxFuture};
use futures::FutureExt;
use zapraid::{FormatOptions, GroupMode, ZapRaidVolume};
use zns::{
    BlockDevice, ErrorPlan, FaultyZoned, NvmeStatus, OpSet, ReportFilter, SimRng, ZonedDevice,
};

const SPAN: u64 = 64;

/// What each LBA may hold: the versions from the last one known durable onwards, in
/// submission order; version 0 and trims read as zeros.
struct Model {
    /// Per LBA: (version, reads as zeros) from the durable one on.
    allowed: Vec<Vec<(u64, bool)>>,
}

impl Model {
    fn new() -> Model {
        Model {
            allowed: vec![vec![(0, true)]; SPAN as usize],
        }
    }

    fn submitted(&mut self, lba: u64, version: u64, zero: bool) {
        self.allowed[lba as usize].push((version, zero));
    }

    /// `version` of `lba` is durable: nothing older may come back.
    fn durable(&mut self, lba: u64, version: u64) {
        let a = &mut self.allowed[lba as usize];
        if let Some(i) = a.iter().position(|(v, _)| *v == version) {
            a.drain(..i);
        }
    }

    /// Everything submitted so far completed and a flush completed after it.
    fn flushed(&mut self) {
        for a in &mut self.allowed {
            let last = a.len() - 1;
            a.drain(..last);
        }
    }

    /// After a restart: checks what `lba` reads and makes it the only version it may hold.
    fn check(&mut self, lba: u64, got: &[u8], what: &str) {
        let bs = got.len();
        let a = &mut self.allowed[lba as usize];
        let zero = got.iter().all(|b| *b == 0);
        let hit = a.iter().rposition(|(v, z)| {
            if zero {
                *z
            } else {
                !*z && got == block(bs, lba, *v)
            }
        });
        match hit {
            // Recovery settled the LBA: the versions in flight at the cut that it did not
            // find are gone for good (the host forgot them), so a later flush must not
            // expect them.
            Some(i) => *a = vec![a[i]],
            None => panic!(
                "{what}: LBA {lba} holds none of the versions it may hold {a:?} (zeros: {zero})"
            ),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Write {
        lba: u64,
        len: u64,
        first: u64,
        fua: bool,
    },
    Trim {
        lba: u64,
        len: u64,
        first: u64,
        zeroes: bool,
        fua: bool,
    },
}

#[derive(Default, Debug, Clone, PartialEq, Eq)]
struct Coverage {
    cuts: u64,
    cuts_with_commands_in_flight: u64,
    /// Cuts that left a group barrier landed on some live member and not on another.
    cuts_across_a_barrier: u64,
    ops_in_flight_at_cut: u64,
    fua_in_flight_at_cut: u64,
    trims_in_flight_at_cut: u64,
    multi_block_writes_in_flight_at_cut: u64,
    ops_completed: u64,
    blocks_checked: u64,
    segments_collected: u64,
    cuts_during_collection: u64,
    member_deaths: u64,
    cuts_with_a_member_dead_or_failed: u64,
    opens_with_the_member_still_dead: u64,
    reopens_keeping_a_member_failed: u64,
    /// A healthy member died at the instant of the cut, before the reopen.
    member_deaths_at_cut: u64,
    recoveries_started: u64,
    recoveries_finished: u64,
    cuts_during_recovery: u64,
    /// Recoveries onto a replacement that an earlier cut interrupted.
    recoveries_after_a_cut_one: u64,
    /// Cuts (m = 2) with two members dead or failed: stripes short of two blocks.
    cuts_with_two_members_dead_or_failed: u64,
    schedules: u64,
    /// Schedules on members without metadata (records in-band) and their cuts.
    in_band_schedules: u64,
    in_band_cuts: u64,
}

impl Coverage {
    fn add(&mut self, c: &Coverage) {
        self.cuts += c.cuts;
        self.cuts_with_commands_in_flight += c.cuts_with_commands_in_flight;
        self.cuts_across_a_barrier += c.cuts_across_a_barrier;
        self.ops_in_flight_at_cut += c.ops_in_flight_at_cut;
        self.fua_in_flight_at_cut += c.fua_in_flight_at_cut;
        self.trims_in_flight_at_cut += c.trims_in_flight_at_cut;
        self.multi_block_writes_in_flight_at_cut += c.multi_block_writes_in_flight_at_cut;
        self.ops_completed += c.ops_completed;
        self.blocks_checked += c.blocks_checked;
        self.segments_collected += c.segments_collected;
        self.cuts_during_collection += c.cuts_during_collection;
        self.member_deaths += c.member_deaths;
        self.cuts_with_a_member_dead_or_failed += c.cuts_with_a_member_dead_or_failed;
        self.opens_with_the_member_still_dead += c.opens_with_the_member_still_dead;
        self.reopens_keeping_a_member_failed += c.reopens_keeping_a_member_failed;
        self.member_deaths_at_cut += c.member_deaths_at_cut;
        self.recoveries_started += c.recoveries_started;
        self.recoveries_finished += c.recoveries_finished;
        self.cuts_during_recovery += c.cuts_during_recovery;
        self.recoveries_after_a_cut_one += c.recoveries_after_a_cut_one;
        self.cuts_with_two_members_dead_or_failed += c.cuts_with_two_members_dead_or_failed;
        self.schedules += c.schedules;
        self.in_band_schedules += c.in_band_schedules;
        self.in_band_cuts += c.in_band_cuts;
    }
}

type Faulty = FaultyZoned<Arc<EmuDevice>>;

fn batch(rng: &mut SimRng, version: &mut u64) -> Vec<Op> {
    let n = rng.range_inclusive(2, 6);
    let slice = SPAN / n;
    (0..n)
        .map(|k| {
            let len = if rng.chance(0.3) {
                rng.range_inclusive(4, slice.min(10))
            } else {
                rng.range_inclusive(1, 2)
            };
            let lba = k * slice + rng.below(slice - len + 1);
            let first = *version + 1;
            *version += len;
            if rng.chance(0.8) {
                Op::Write {
                    lba,
                    len,
                    first,
                    fua: rng.chance(0.25),
                }
            } else {
                let zeroes = rng.chance(0.5);
                Op::Trim {
                    lba,
                    len,
                    first,
                    zeroes,
                    fua: zeroes && rng.chance(0.5),
                }
            }
        })
        .collect()
}

async fn run_op(
    vol: &ZapRaidVolume,
    model: &RefCell<Model>,
    op: Op,
    bs: usize,
) -> Result<(), zns::BlockError> {
    match op {
        Op::Write {
            lba,
            len,
            first,
            fua,
        } => {
            let mut data = Vec::new();
            for i in 0..len {
                data.extend(block(bs, lba + i, first + i));
                model.borrow_mut().submitted(lba + i, first + i, false);
            }
            vol.write(lba, &data, fua).await?;
            if fua {
                (0..len).for_each(|i| model.borrow_mut().durable(lba + i, first + i));
            }
        }
        Op::Trim {
            lba,
            len,
            first,
            zeroes,
            fua,
        } => {
            (0..len).for_each(|i| model.borrow_mut().submitted(lba + i, first + i, true));
            if zeroes {
                vol.write_zeroes(lba, len, fua).await?;
            } else {
                vol.trim(lba, len).await?;
            }
            if fua {
                (0..len).for_each(|i| model.borrow_mut().durable(lba + i, first + i));
            }
        }
    }
    Ok(())
}

/// What a schedule injects besides power cuts with I/O in flight.
#[derive(Clone, Copy, Debug)]
struct Faults {
    /// Parity blocks per stripe: the array has `3 + m` members, and up to `m` die.
    m: u32,
    /// Chance per round, from round 2 on, that a member dies before the round (`m` deaths
    /// per schedule at most: one more would fail the volume).
    death_before_round: f64,
    /// Chance per cut that a member dies at the instant of the cut, before the reopen.
    death_at_cut: f64,
    /// Chance per round with a failed member that a recovery onto the spare runs alongside
    /// the batch (so cuts fall inside recoveries, and later rounds recover again).
    recovery: f64,
}

impl Faults {
    const USUAL: Faults = Faults {
        m: 1,
        death_before_round: 0.1,
        death_at_cut: 0.0,
        recovery: 0.0,
    };
    const RECOVERING: Faults = Faults {
        m: 1,
        death_before_round: 0.25,
        death_at_cut: 0.15,
        recovery: 0.6,
    };
    /// Reed-Solomon, two members dying (before rounds and at cuts), recoveries of one.
    const TWO_PARITY: Faults = Faults {
        m: 2,
        death_before_round: 0.3,
        death_at_cut: 0.15,
        recovery: 0.3,
    };
}

/// The error plan of a dead member: every command fails, Namespace Not Ready.
fn dies(f: &Faulty) {
    f.set_errors(ErrorPlan {
        ops: OpSet::ALL,
        fail_nth: Some(1),
        repeat: 1 << 40,
        status: NvmeStatus::NamespaceNotReady,
        ..ErrorPlan::default()
    })
    .expect("error plan");
}

/// One seeded schedule over members of `zones` zones: with 5, the volume has 5 segments, so
/// the segments each restart leaves sealed and the writes fill them and collection runs
/// in most rounds, cuts included. A fifth device is the spare a recovery rebuilds onto.
async fn schedule(seed: u64, rounds: usize, zones: u32, faults: Faults) -> (Coverage, Vec<String>) {
    let mut cov = Coverage {
        schedules: 1,
        ..Coverage::default()
    };
    // Everything observable, in order: two runs of a seed must produce the same record.
    let mut events: Vec<String> = Vec::new();
    // Virtual time since the schedule began (the paused clock starts at an arbitrary instant).
    let t0 = tokio::time::Instant::now();
    let mut rng = SimRng::new(seed);
    let n = 3 + faults.m as usize;
    // Decided by the seed, not drawn, so the other schedules run as they did before.
    let in_band = seed % 4 == 1;
    let emus = if in_band {
        cov.in_band_schedules = 1;
        emu_members_without_metadata(n + 1, zones, seed)
    } else {
        emu_members(n + 1, zones, seed)
    };
    let faulty: Vec<Arc<Faulty>> = emus
        .iter()
        .enumerate()
        .map(|(i, e)| Arc::new(FaultyZoned::new(e.clone(), seed * 7 + i as u64)))
        .collect();
    for f in &faulty {
        // Commands wait up to 2 ms before they reach the member, so a cut finds some on the way.
        f.set_in_flight_delay(Duration::from_millis(2));
    }
    let mut members: Vec<Arc<dyn ZonedDevice>> = faulty[..n]
        .iter()
        .map(|f| f.clone() as Arc<dyn ZonedDevice>)
        .collect();
    // The member position the spare (device n) took, once a recovery began.
    let mut spare_at: Option<usize> = None;
    let dev_of = |i: usize, spare_at: Option<usize>| if spare_at == Some(i) { n } else { i };
    let mode = match rng.below(3) {
        // In-band records need groups of two stripes at least (one is the summary).
        // and at most a quarter of a segment (a flush pads the open group).
        0 if in_band => GroupMode::Grouped(2),
        1 if in_band => GroupMode::Grouped(rng.range_inclusive(9, 15) as u32),
        0 => GroupMode::ZoneWriteOnly,
        1 => GroupMode::ZoneAppendOnly,
        _ => GroupMode::Grouped(rng.range_inclusive(2, 8) as u32),
    };
    let opts = FormatOptions {
        mode,
        ..FormatOptions::new(3, faults.m)
    };
    let mut vol = ZapRaidVolume::format(members.clone(), &opts)
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: format: {e}"));
    let bs = vol.block_size() as usize;
    let model = RefCell::new(Model::new());
    let mut version = 0u64;
    // Member deaths and recoveries draw from their own generator, so schedules without them
    // run as before.
    let mut frng = SimRng::new(seed ^ 0x5eed_fa11);
    let mut dead: Vec<usize> = Vec::new();
    let mut deaths = 0u32;
    let trace = std::env::var("ZAPRAID_CUT_TRACE").is_ok();
    for round in 0..rounds {
        let what = format!("seed {seed} round {round} ({mode:?})");
        // The spare is not killed (m = 2): the schedule's one spare stays usable.
        let death = deaths < faults.m && round >= 2 && frng.chance(faults.death_before_round);
        let victim = death.then(|| frng.below(n as u64) as usize);
        if let Some(i) = victim.filter(|i| spare_at != Some(*i)) {
            dies(&faulty[dev_of(i, spare_at)]);
            if !dead.contains(&i) {
                dead.push(i);
            }
            deaths += 1;
            cov.member_deaths += 1;
            events.push(format!("member {i} dies"));
            if trace {
                println!("{what}: member {i} dies");
            }
        }
        // A recovery of the failed member onto the spare (again, if a cut stopped one).
        let recovery = match vol.failed_members().first() {
            Some(&i)
                if (spare_at.is_none() || spare_at == Some(i)) && frng.chance(faults.recovery) =>
            {
                cov.recoveries_started += 1;
                cov.recoveries_after_a_cut_one += u64::from(spare_at.is_some());
                spare_at = Some(i);
                members[i] = faulty[n].clone();
                // The dead device leaves the array for good.
                dead.retain(|d| *d != i);
                events.push(format!("recovery of member {i} onto the spare"));
                if trace {
                    println!("{what}: recovery of member {i} onto the spare");
                }
                Some(i)
            }
            _ => None,
        };
        let ops = batch(&mut rng, &mut version);
        events.push(format!("round {round}: {ops:?}"));
        if trace {
            println!("{what}: {ops:?}");
        }
        let done = RefCell::new(vec![false; ops.len()]);
        let recovered = std::cell::Cell::new(false);
        let mut futs: Vec<LocalBoxFuture<'_, ()>> = ops
            .iter()
            .enumerate()
            .map(|(k, op)| {
                let (vol, model, done, what) = (&vol, &model, &done, &what);
                let op = *op;
                async move {
                    run_op(vol, model, op, bs)
                        .await
                        .unwrap_or_else(|e| panic!("{what}: {op:?}: {e}"));
                    done.borrow_mut()[k] = true;
                }
                .boxed_local()
            })
            .collect();
        if let Some(i) = recovery {
            let (vol, what, recovered) = (&vol, &what, &recovered);
            let spare = faulty[n].clone() as Arc<dyn ZonedDevice>;
            futs.push(
                async move {
                    vol.replace_member(i, spare, false)
                        .await
                        .unwrap_or_else(|e| panic!("{what}: recovery of member {i}: {e}"));
                    recovered.set(true);
                }
                .boxed_local(),
            );
        }
        if !rng.chance(0.4) {
            join_all(futs).await;
            cov.ops_completed += ops.len() as u64;
            events.push(format!("completed at {:?}", t0.elapsed()));
            if let Some(i) = recovery {
                cov.recoveries_finished += 1;
                assert!(
                    !vol.failed_members().contains(&i),
                    "{what}: member {i} recovered"
                );
            }
            if rng.chance(0.3) {
                vol.flush()
                    .await
                    .unwrap_or_else(|e| panic!("{what}: flush: {e}"));
                model.borrow_mut().flushed();
                events.push(format!("flushed at {:?}", t0.elapsed()));
                if trace {
                    println!("{what}: flushed");
                }
            }
            continue;
        }
        // Whole milliseconds: tokio's timer counts them, so a seed repeats its run exactly.
        let cut_after = Duration::from_millis(rng.range_inclusive(1, 6));
        // Power goes on every device at once, at the instant the timer fires and before the
        // batch is dropped (so its commands count as in flight); then the host forgets them.
        let cut_all = || -> u64 { faulty.iter().map(|f| f.cut_power()).sum() };
        let cut = async {
            tokio::time::sleep(cut_after).await;
            cut_all()
        };
        let (finished, in_flight) = tokio::select! {
            // Polled in order, so a seed repeats its run exactly.
            biased;
            _ = join_all(futs) => (true, cut_all()),
            n = cut => (false, n),
        };
        vol.crash();
        let st = vol.stats();
        events.push(format!(
            "cut after {cut_after:?} at {:?}: finished {finished}, {in_flight} member commands in flight, done {:?}, {st:?}",
            t0.elapsed(),
            done.borrow()
        ));
        cov.segments_collected += st.segments_collected;
        cov.cuts_during_collection += u64::from(st.collections_started > st.segments_collected);
        if recovery.is_some() {
            if recovered.get() {
                cov.recoveries_finished += 1;
            } else {
                cov.cuts_during_recovery += 1;
            }
        }
        if trace {
            println!(
                "{what}: cut after {cut_after:?}, finished {finished}, done {:?}",
                done.borrow()
            );
        }
        cov.cuts += 1;
        cov.in_band_cuts += cov.in_band_schedules;
        cov.cuts_with_commands_in_flight += u64::from(in_flight > 0);
        let down = {
            let mut f = vol.failed_members();
            f.extend(dead.iter().copied());
            f.sort_unstable();
            f.dedup();
            f.len()
        };
        cov.cuts_with_a_member_dead_or_failed += u64::from(down > 0);
        cov.cuts_with_two_members_dead_or_failed += u64::from(down > 1);
        if !finished {
            for (k, op) in ops.iter().enumerate() {
                if done.borrow()[k] {
                    continue;
                }
                cov.ops_in_flight_at_cut += 1;
                match op {
                    Op::Write { len, fua, .. } => {
                        cov.fua_in_flight_at_cut += u64::from(*fua);
                        cov.multi_block_writes_in_flight_at_cut += u64::from(*len > 1);
                    }
                    Op::Trim { .. } => cov.trims_in_flight_at_cut += 1,
                }
            }
        }
        for (e, f) in emus.iter().zip(&faulty) {
            e.power_loss(rng.next_u64()).expect("member power loss");
            f.restore_power();
        }
        // Read from the emulated devices themselves: through `FaultyZoned` the reports would
        // draw delays and change the rest of the schedule.
        let live: Vec<Arc<EmuDevice>> = (0..n)
            .filter(|i| !dead.contains(i) && !vol.failed_members().contains(i))
            .map(|i| emus[dev_of(i, spare_at)].clone())
            .collect();
        let l = vol.layout();
        cov.cuts_across_a_barrier +=
            u64::from(cut_across_a_barrier(&live, l.group, l.stripes).await);
        let was_failed = vol.failed_members();
        // A dead member comes back holding what it held (stale), or stays away.
        for i in std::mem::take(&mut dead) {
            if frng.chance(0.5) {
                faulty[dev_of(i, spare_at)].clear_errors();
            } else {
                cov.opens_with_the_member_still_dead += 1;
                dead.push(i);
            }
        }
        // A member dies with the power cut: the stripes the cut tore lose a second block.
        let death = deaths < faults.m && frng.chance(faults.death_at_cut);
        let victim = death.then(|| frng.below(n as u64) as usize);
        if let Some(i) = victim.filter(|i| spare_at != Some(*i)) {
            dies(&faulty[dev_of(i, spare_at)]);
            if !dead.contains(&i) {
                dead.push(i);
            }
            deaths += 1;
            cov.member_deaths += 1;
            cov.member_deaths_at_cut += 1;
            events.push(format!("member {i} dies at the cut"));
            if trace {
                println!("{what}: member {i} dies at the cut");
            }
        }
        drop(vol);
        vol = ZapRaidVolume::open(members.clone())
            .await
            .unwrap_or_else(|e| panic!("{what}: open after the cut: {e}"));
        let failed = vol.failed_members();
        events.push(format!("reopened, failed members {failed:?}"));
        if trace {
            println!("{what}: reopened, failed members {failed:?} (dead: {dead:?})");
        }
        for i in &dead {
            assert!(
                failed.contains(i),
                "{what}: member {i} is dead at open: {failed:?}"
            );
        }
        if !was_failed.is_empty() && failed == was_failed {
            cov.reopens_keeping_a_member_failed += 1;
        }
        assert!(
            failed.len() <= faults.m as usize,
            "{what}: failed members {failed:?}"
        );
        vol.verify()
            .unwrap_or_else(|e| panic!("{what}: index after the cut: {e}"));
        // The batch is gone, so nothing else borrows the model while the check runs.
        let mut m = model.replace(Model::new());
        for lba in 0..SPAN {
            let mut b = vec![0u8; bs];
            vol.read(lba, &mut b)
                .await
                .unwrap_or_else(|e| panic!("{what}: read {lba} after the cut: {e}"));
            m.check(lba, &b, &what);
            events.push(format!("LBA {lba}: crc {:08x}", crc32c::crc32c(&b)));
            cov.blocks_checked += 1;
        }
        model.replace(m);
    }
    cov.segments_collected += vol.stats().segments_collected;
    events.push(format!("end: {:?}", vol.stats()));
    drop(vol);
    (cov, events)
}

/// The seeds to run: `range`, or the one in `ZAPRAID_CUT_SEED` if it falls in it (none if
/// it names another test's seed).
fn seeds(range: std::ops::Range<u64>) -> Vec<u64> {
    match std::env::var("ZAPRAID_CUT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) if range.contains(&seed) => vec![seed],
        Some(_) => Vec::new(),
        None => range.collect(),
    }
}

/// Whether a cut (after the members' power loss) left a group barrier half done: in a
/// segment open on every live member, one holds blocks past the end of a group (its barrier
/// landed there) while another holds fewer than that (its barrier, or appends below it,
/// did not land). Groups end at every multiple of G and at S; block 0 is the header.
async fn cut_across_a_barrier(live: &[Arc<EmuDevice>], group: u32, stripes: u32) -> bool {
    let (g, s) = (u64::from(group.max(1)), u64::from(stripes));
    let mut held: Vec<Vec<Option<u64>>> = Vec::new();
    for dev in live {
        let zones = dev.geometry().zone_count as usize;
        let r = dev
            .report_zones(0, ReportFilter::All, false, zones)
            .await
            .expect("report zones after the cut");
        held.push(
            r.zones
                .iter()
                .map(|z| {
                    let d = (z.wp - z.start).saturating_sub(1).min(s);
                    z.state.is_active().then_some(d)
                })
                .collect(),
        );
    }
    let zones = held.first().map_or(0, Vec::len);
    (0..zones).any(|z| {
        let ds: Option<Vec<u64>> = held.iter().map(|h| h.get(z).copied().flatten()).collect();
        let Some(ds) = ds else { return false };
        let (lo, hi) = (ds.iter().min(), ds.iter().max());
        let (Some(&lo), Some(&hi)) = (lo, hi) else {
            return false;
        };
        lo < hi && (hi / g * g > lo || hi == s)
    })
}

/// Schedules of each test: together at least 1,000 (issue 11).
const WRITE_SCHEDULES: u64 = 400;
const GC_SCHEDULES: u64 = 400;
const RECOVERY_SCHEDULES: u64 = 300;
const TWO_PARITY_SCHEDULES: u64 = 60;
const _: () = assert!(WRITE_SCHEDULES + GC_SCHEDULES + RECOVERY_SCHEDULES >= 1000);

fn run(seeds: &[u64], rounds: usize, zones: u32, faults: Faults) -> Coverage {
    let mut total = Coverage::default();
    for seed in seeds {
        total.add(&runtime().block_on(schedule(*seed, rounds, zones, faults)).0);
    }
    println!("{total:?}");
    total
}

/// Seeds 0 .. 400: members of 32 zones, writes, trims and FUA writes in flight at the cuts;
/// a member dies before a round in some.
#[test]
fn power_cuts_with_writes_trims_and_fua_in_flight() {
    let seeds = seeds(0..WRITE_SCHEDULES);
    let total = run(&seeds, 6, 32, Faults::USUAL);
    if seeds.len() < 2 {
        return;
    }
    assert_eq!(total.schedules, WRITE_SCHEDULES);
    assert!(total.cuts >= 700, "{total:?}");
    assert!(total.cuts_with_commands_in_flight >= 400, "{total:?}");
    // Measured 373 (2026-11-24): barriers landed on some members and not others.
    assert!(total.cuts_across_a_barrier >= 250, "{total:?}");
    assert!(total.ops_in_flight_at_cut >= 700, "{total:?}");
    assert!(total.fua_in_flight_at_cut >= 60, "{total:?}");
    assert!(total.trims_in_flight_at_cut >= 60, "{total:?}");
    assert!(
        total.multi_block_writes_in_flight_at_cut >= 120,
        "{total:?}"
    );
    assert!(total.ops_completed >= 1000, "{total:?}");
    assert!(total.member_deaths >= 80, "{total:?}");
    assert!(total.cuts_with_a_member_dead_or_failed >= 80, "{total:?}");
    assert!(total.opens_with_the_member_still_dead >= 30, "{total:?}");
    assert!(total.in_band_schedules == WRITE_SCHEDULES / 4, "{total:?}");
    assert!(total.in_band_cuts >= 170, "{total:?}");
}

/// Seeds 1000 .. 1400: members of 5 zones, so garbage collection runs in most rounds (every
/// restart leaves one more segment sealed) and power is cut during collections: before the
/// copies are flushed, between the flush and the resets, and between resets of the members.
#[test]
fn power_cuts_during_garbage_collection() {
    let seeds = seeds(1000..1000 + GC_SCHEDULES);
    let total = run(&seeds, 8, 5, Faults::USUAL);
    if seeds.len() < 2 {
        return;
    }
    assert_eq!(total.schedules, GC_SCHEDULES);
    assert!(total.cuts >= 1000, "{total:?}");
    assert!(total.segments_collected >= 300, "{total:?}");
    assert!(total.cuts_during_collection >= 80, "{total:?}");
    assert!(total.cuts_across_a_barrier >= 300, "{total:?}"); // measured 453
    assert!(total.ops_in_flight_at_cut >= 1500, "{total:?}");
    assert!(total.member_deaths >= 80, "{total:?}");
    assert!(total.cuts_with_a_member_dead_or_failed >= 100, "{total:?}");
    assert!(total.in_band_cuts >= 250, "{total:?}");
}

/// Seeds 2000 .. 2300, members of 6 zones (collections run too): members die before rounds and at the instant of cuts (so the open
/// after a cut finds a member gone and the stripes the cut tore short of two blocks), and
/// recoveries onto a spare run alongside client I/O, some cut by the power and started again.
#[test]
fn power_cuts_during_recovery_and_member_deaths_at_cuts() {
    let seeds = seeds(2000..2000 + RECOVERY_SCHEDULES);
    let total = run(&seeds, 12, 6, Faults::RECOVERING);
    if seeds.len() < 2 {
        return;
    }
    assert_eq!(total.schedules, RECOVERY_SCHEDULES);
    assert!(total.member_deaths_at_cut >= 50, "{total:?}");
    assert!(total.recoveries_started >= 300, "{total:?}");
    assert!(total.recoveries_finished >= 180, "{total:?}");
    assert!(total.cuts_during_recovery >= 120, "{total:?}");
    assert!(total.recoveries_after_a_cut_one >= 100, "{total:?}");
    assert!(total.segments_collected >= 300, "{total:?}");
    assert!(total.cuts_during_collection >= 100, "{total:?}");
    assert!(total.cuts_across_a_barrier >= 350, "{total:?}"); // measured 545
    assert!(total.in_band_cuts >= 150, "{total:?}");
}

/// Seeds 3000 .. 3060, 3 + 2 members (Reed-Solomon) of 6 zones: two members die (before
/// rounds and at the instant of cuts), so opens and reads rebuild blocks of stripes short of
/// two, power cuts tear stripes with two members down, and recoveries of one of them onto a
/// spare run alongside client I/O (and are cut).
#[test]
fn power_cuts_with_two_parity_blocks_and_two_members_down() {
    let seeds = seeds(3000..3000 + TWO_PARITY_SCHEDULES);
    let total = run(&seeds, 10, 6, Faults::TWO_PARITY);
    if seeds.len() < 2 {
        return;
    }
    assert_eq!(total.schedules, TWO_PARITY_SCHEDULES);
    assert!(total.cuts >= 180, "{total:?}");
    assert!(total.cuts_across_a_barrier >= 60, "{total:?}"); // measured 95
    assert!(total.ops_in_flight_at_cut >= 300, "{total:?}");
    assert!(total.member_deaths >= 70, "{total:?}");
    assert!(
        total.cuts_with_two_members_dead_or_failed >= 20,
        "{total:?}"
    );
    assert!(total.member_deaths_at_cut >= 10, "{total:?}");
    assert!(total.recoveries_started >= 30, "{total:?}");
    assert!(total.recoveries_finished >= 20, "{total:?}");
    assert!(total.cuts_during_recovery >= 10, "{total:?}");
    assert!(total.segments_collected >= 40, "{total:?}");
    assert!(total.in_band_cuts >= 30, "{total:?}");
}

/// Guards against a recovery that wrote a padding block on the replacement for a stripe
/// power loss had torn (it was short of a live member's block too): the next open counted
/// the padding as the stripe's block, took the stripe for one missing a single block, and
/// refused to open because the records did not rebuild it ("the records of its blocks do not
/// rebuild member 1's"). The replacement now writes a hole, which is no part of the stripe.
#[test]
fn a_reopen_after_recovering_a_segment_with_torn_stripes() {
    let (cov, _) = runtime().block_on(schedule(2006, 8, 8, Faults::RECOVERING));
    assert!(cov.recoveries_finished >= 1, "{cov:?}");
    assert!(cov.member_deaths_at_cut >= 1, "{cov:?}");
}

/// Guards against a run that does not repeat from its seed: the write path's select! drew its
/// branch order from the runtime's unseeded generator, so a failing seed could pass when
/// rerun alone. Two runs of the same seeds (cuts, collections, cuts during collections and
/// recoveries) must leave identical records, event by event.
#[test]
fn one_seed_repeats_its_run_exactly() {
    for (seed, rounds, zones, faults) in [
        (3u64, 16usize, 32u32, Faults::USUAL),
        (1004, 24, 5, Faults::USUAL),
        (1005, 24, 5, Faults::USUAL),
        (2003, 16, 8, Faults::RECOVERING),
    ] {
        let (cov_a, events_a) = runtime().block_on(schedule(seed, rounds, zones, faults));
        let (cov_b, events_b) = runtime().block_on(schedule(seed, rounds, zones, faults));
        assert!(cov_a.cuts > 0, "seed {seed} cut nothing: {cov_a:?}");
        for (i, (a, b)) in events_a.iter().zip(&events_b).enumerate() {
            assert_eq!(a, b, "seed {seed}: event {i} differs between runs");
        }
        assert_eq!(
            events_a.len(),
            events_b.len(),
            "seed {seed}: event counts differ"
        );
        assert_eq!(cov_a, cov_b, "seed {seed}: coverage differs between runs");
    }
}
