//! Per-phase figures of a block-volume run, in virtual time: how busy the flash dies were
//! (the share of die time booked: programs, reads, erases), and for the host FTL what its
//! tasks were doing meanwhile (user writes and copies in flight, time spent waiting for
//! space, collecting, flushing and resetting). They say where the flash sits idle; see
//! docs/BENCHMARKS.md.

use emu::timing::TimingCounters;
use ftl::activity::{ActivityStats, GaugeStats};

use super::*;

/// What the run's device and volume had done at one instant.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub at: Instant,
    /// The flash model's counters and its die count, when the device is timed.
    pub flash: Option<(TimingCounters, u32)>,
    /// The host FTL's activity, for an FTL volume.
    pub ftl: Option<ActivityStats>,
}

/// Takes a sample of the run's device and volume.
pub type Probe<'a> = &'a (dyn Fn() -> Sample + Sync);

/// A probe of nothing: phases report only their length.
pub fn no_probe() -> Sample {
    Sample {
        at: Instant::now(),
        flash: None,
        ftl: None,
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
    v
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
