//! Per-phase figures of a block-volume run, in virtual time: how busy the flash dies were
//! (the share of die time booked: programs, reads, erases), and for the host FTL what its
//! tasks were doing meanwhile (user writes and copies in flight, time spent waiting for
//! space, collecting, flushing and resetting). They say where the flash sits idle; see
//! docs/BENCHMARKS.md.

use emu::timing::TimingCounters;
use ftl::activity::{ActivityStats, GaugeStats};
use ftl::map::{Counters, Stream};

use super::*;

/// What the run's device and volume had done at one instant.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at: Instant,
    /// The flash model's counters and its die count, when the device is timed.
    pub flash: Option<(TimingCounters, u32)>,
    /// The host FTL's activity, for an FTL volume.
    pub ftl: Option<ActivityStats>,
    /// The host FTL's counters (blocks per stream, copies, victims by class), for an FTL
    /// volume.
    pub ftl_counters: Option<Counters>,
}

/// Takes a sample of the run's device and volume.
pub type Probe<'a> = &'a (dyn Fn() -> Sample + Sync);

/// A probe of nothing: phases report only their length.
pub fn no_probe() -> Sample {
    Sample {
        at: Instant::now(),
        flash: None,
        ftl: None,
        ftl_counters: None,
    }
}

fn ratio(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        n as f64 / d as f64
    }
}

/// One gauge over a phase: mean level, share of the phase it was above zero, times entered
/// and mean time per entry (ms).
fn gauge_json(a: &GaugeStats, b: &GaugeStats, span_ns: u64) -> Value {
    let entered = b.entered.saturating_sub(a.entered);
    let level_ns = b.level_ns.saturating_sub(a.level_ns);
    json!({
        "mean_in_flight": ratio(level_ns, span_ns),
        "busy_share": ratio(b.busy_ns.saturating_sub(a.busy_ns), span_ns),
        "count": entered,
        "mean_ms": ratio(level_ns, entered) / 1e6,
    })
}

/// The figures of the phase `name` between samples `a` and `b`.
pub(super) fn phase_json(name: &str, a: &Sample, b: &Sample) -> Value {
    let span_ns = u64::try_from(b.at.duration_since(a.at).as_nanos()).unwrap_or(u64::MAX);
    let mut v = json!({"phase": name, "seconds": span_ns as f64 / 1e9});
    if let (Some((fa, dies)), Some((fb, _))) = (a.flash, b.flash) {
        // Die time spent in the phase, not booked in it (work booked past its end is not
        // counted, so the share never exceeds 1).
        let busy = fb.die_done_ns().saturating_sub(fa.die_done_ns());
        let (x, y) = (fa.flash, fb.flash);
        v["die_busy_share"] = json!(ratio(busy, span_ns.saturating_mul(u64::from(dies))));
        v["programs"] = json!(y.programs.saturating_sub(x.programs));
        v["padded_programs"] = json!(fb.padded_programs.saturating_sub(fa.padded_programs));
        v["reads"] = json!(y.reads.saturating_sub(x.reads));
        v["erases"] = json!(y.erases.saturating_sub(x.erases));
        v["buffer_waits"] = json!(fb.buffer_waits.saturating_sub(fa.buffer_waits));
    }
    if let (Some(x), Some(y)) = (a.ftl, b.ftl) {
        v["user_writes"] = gauge_json(&x.user_writes, &y.user_writes, span_ns);
        v["space_waits"] = gauge_json(&x.space_waits, &y.space_waits, span_ns);
        v["copies"] = gauge_json(&x.copies, &y.copies, span_ns);
        v["gc_rounds"] = gauge_json(&x.rounds, &y.rounds, span_ns);
        v["flushes"] = gauge_json(&x.flushes, &y.flushes, span_ns);
        v["resets"] = gauge_json(&x.resets, &y.resets, span_ns);
    }
    if let (Some(x), Some(y)) = (a.ftl_counters, b.ftl_counters) {
        v["ftl"] = counters_json(&x, &y);
    }
    v
}

/// What the host FTL wrote and collected between counters `x` and `y`: user blocks, copies
/// and copies per user block, rounds and those that flushed the device, and per stream the
/// blocks written, zones opened, and the victims among its zones with the valid blocks they
/// held on average when taken.
fn counters_json(x: &Counters, y: &Counters) -> Value {
    let d = |a: u64, b: u64| b.saturating_sub(a);
    let user = d(x.user_blocks, y.user_blocks);
    let copies = d(x.gc_blocks, y.gc_blocks);
    let streams: serde_json::Map<String, Value> = Stream::ALL
        .iter()
        .map(|s| {
            let i = s.index();
            let victims = d(x.gc_victims[i], y.gc_victims[i]);
            let valid = d(x.gc_victim_valid[i], y.gc_victim_valid[i]);
            let v = json!({
                "blocks": d(x.stream_blocks[i], y.stream_blocks[i]),
                "zones_opened": d(x.stream_zones[i], y.stream_zones[i]),
                "victims": victims,
                "victims_mean_valid_blocks": ratio(valid, victims),
            });
            (s.name().to_string(), v)
        })
        .collect();
    json!({
        "user_blocks": user,
        "copies": copies,
        "copies_per_user_block": ratio(copies, user),
        "rounds": d(x.gc_rounds, y.gc_rounds),
        "round_flushes": d(x.gc_round_flushes, y.gc_round_flushes),
        "streams": streams,
    })
}

/// One line per phase for the text report.
pub fn phases_text(phases: &[Value]) -> String {
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let g = |v: &Value, k: &str, f2: &str| {
        v.get(k)
            .and_then(|x| x.get(f2))
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    };
    let mut s = String::new();
    for p in phases {
        let name = p.get("phase").and_then(Value::as_str).unwrap_or("?");
        s += &format!(
            "  phase {name}: {:.3} s, dies busy {:.1}%",
            f(p, "seconds"),
            f(p, "die_busy_share") * 100.0
        );
        if p.get("copies").is_some() {
            s += &format!(
                "; in flight: user writes {:.1}, copies {:.2}; writers waiting for space {:.1}% of the time; collecting {:.1}% ({} rounds), flushes {} ({:.2} ms each), resets {:.2} ms per round",
                g(p, "user_writes", "mean_in_flight"),
                g(p, "copies", "mean_in_flight"),
                g(p, "space_waits", "busy_share") * 100.0,
                g(p, "gc_rounds", "busy_share") * 100.0,
                g(p, "gc_rounds", "count"),
                g(p, "flushes", "count"),
                g(p, "flushes", "mean_ms"),
                g(p, "resets", "mean_ms"),
            );
        }
        s += "\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    // A phase's FTL figures are the counters' differences between its two samples: per
    // stream the blocks written, zones opened and victims taken with the valid blocks they
    // held on average, and copies per user block.
    #[test]
    fn a_phase_reports_what_the_ftl_wrote_and_collected_in_it() {
        let before = Counters {
            user_blocks: 100,
            gc_blocks: 50,
            stream_blocks: [80, 20, 30, 20],
            gc_victims: [1, 0, 0, 1],
            gc_victim_valid: [10, 0, 0, 60],
            ..Default::default()
        };
        let after = Counters {
            user_blocks: 300,
            gc_blocks: 350,
            stream_blocks: [260, 40, 130, 220],
            stream_zones: [3, 1, 2, 4],
            gc_victims: [5, 0, 0, 3],
            gc_victim_valid: [90, 0, 0, 250],
            gc_rounds: 4,
            gc_round_flushes: 1,
            ..Default::default()
        };
        let sample = |c| Sample {
            ftl_counters: Some(c),
            ..no_probe()
        };
        let v = phase_json("p", &sample(before), &sample(after));
        let f = &v["ftl"];
        assert_eq!(f["user_blocks"], 200);
        assert_eq!(f["copies"], 300);
        assert_eq!(f["copies_per_user_block"], 1.5);
        assert_eq!(f["rounds"], 4);
        assert_eq!(f["round_flushes"], 1);
        let hot = &f["streams"]["user"];
        assert_eq!(hot["blocks"], 180);
        assert_eq!(hot["zones_opened"], 3);
        assert_eq!(hot["victims"], 4);
        assert_eq!(hot["victims_mean_valid_blocks"], 20.0);
        let cold = &f["streams"]["gc_cold"];
        assert_eq!(cold["blocks"], 200);
        assert_eq!(cold["victims"], 2);
        assert_eq!(cold["victims_mean_valid_blocks"], 95.0);
        assert_eq!(f["streams"]["user_cold"]["victims_mean_valid_blocks"], 0.0);
        // No FTL counters (a conventional drive): no FTL figures.
        assert!(phase_json("p", &no_probe(), &no_probe())
            .get("ftl")
            .is_none());
    }
}
