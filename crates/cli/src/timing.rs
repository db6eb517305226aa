//! The `--timing PROFILE` option of `serve` and `session`: looks a flash timing profile up by
//! name, switches the emulated device's timing model on in real time, and lists the profiles.

use std::io::Write;

use emu::timing::{timing_profile, timing_profiles, TimingProfile};
use emu::{ClockMode, EmuDevice};

use crate::error::{CliError, CliResult};
use crate::units::format_size;

/// Looks `name` up, or refuses it as a usage error naming every valid profile. Called before
/// any device is opened, so a typo never touches an image or binds a socket.
pub fn profile_named(name: &str) -> Result<TimingProfile, CliError> {
    timing_profile(name).ok_or_else(|| {
        let names: Vec<_> = timing_profiles().iter().map(|p| p.name).collect();
        CliError::Usage(format!(
            "unknown timing profile '{name}' (timing profiles: {})",
            names.join(", ")
        ))
    })
}

/// Switches the timing model on, so every command completes when the profile says, in real
/// time. A device geometry the model cannot serve (for instance more active zones than the
/// profile's write buffer can hold a partial unit for) is a usage error: the same image works
/// without `--timing` or with another profile.
pub fn enable(dev: EmuDevice, p: TimingProfile) -> Result<EmuDevice, CliError> {
    dev.with_timing(p, ClockMode::RealTime)
        .map_err(|e| CliError::Usage(format!("{e}, or pick another timing profile")))
}

/// The error for --timing on a real device: the timing model delays an emulator's
/// completions; a drive has its own timing.
pub fn not_on_drive() -> CliError {
    CliError::Usage(
        "--timing works on emulator images only: a real device has its own timing".into(),
    )
}

/// One line for a startup banner: the profile and its clock.
pub fn describe(p: &TimingProfile) -> String {
    format!("timing profile {} in real time", p.name)
}

/// Nanoseconds as microseconds, or milliseconds from one millisecond up.
fn latency(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} us", ns as f64 / 1e3)
    }
}

/// The timing profiles as a table: flash layout, latencies, host link and write buffer.
pub fn list(out: &mut impl Write) -> CliResult {
    writeln!(
        out,
        "{:<9} {:<16} {:<7} {:>6} {:>9} {:>9} {:>9} {:>10}  write buffer",
        "timing", "channels x dies", "planes", "page", "read", "program", "erase", "host MB/s"
    )?;
    for p in timing_profiles() {
        writeln!(
            out,
            "{:<9} {:<16} {:<7} {:>6} {:>9} {:>9} {:>9} {:>10}  {}",
            p.name,
            format!("{} x {}", p.channels, p.dies_per_channel),
            p.planes,
            format_size(u64::from(p.page_bytes)),
            latency(p.page_read_ns),
            latency(p.page_program_ns),
            latency(p.block_erase_ns),
            (p.host_bytes_per_sec as f64 / 1e6).round() as u64,
            format_size(p.write_buffer_bytes)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_unknown_names_list_the_valid_ones() {
        for p in timing_profiles() {
            assert_eq!(profile_named(p.name).map(|q| q.name).ok(), Some(p.name));
        }
        match profile_named("nosuch") {
            Err(CliError::Usage(m)) => {
                assert!(m.contains("nosuch") && m.contains("zn540, femu-mlc"), "{m}")
            }
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn units_are_readable() {
        assert_eq!(latency(74_043), "74.0 us");
        assert_eq!(latency(3_500_000), "3.5 ms");
        assert_eq!(format_size(16 << 10), "16 KiB");
        assert_eq!(format_size(8 << 20), "8 MiB");
    }
}
