//! `zonestack serve`: a host FTL volume exported over NBD, on an emulated device image or an
//! in-memory emulated device. Shuts down on SIGINT or SIGTERM: in-flight requests finish,
//! the volume is flushed and checkpointed, and the image is closed; a step that fails is
//! reported with its cause and makes the exit status 1, and only a shutdown where every
//! step worked says "volume flushed and checkpointed". Logs its start and each shutdown
//! step at info level.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use bench::jobfile::parse_size;
use clap::Args;
use emu::{EmuConfig, EmuDevice, TimingProfile};
use ftl::{FormatOptions, FtlVolume};
use nbd::{Listen, NbdServer, ServerConfig};
use tracing::info;
use zns::{BlockDevice, Geometry, ZonedDevice};

use crate::cmd_ftl::MountArgs;
use crate::commands;
use crate::error::{CliError, CliResult};
use crate::members::Members;
use crate::opened::Opened;
use crate::units::format_size;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Emulated device image, or zoned block device (/dev/...), holding the volume
    /// (formatted on first use if every zone is empty).
    #[arg(long, conflicts_with = "memory")]
    pub device: Option<PathBuf>,
    /// Serve a volume of this size on an in-memory emulated device (the default, 1G).
    #[arg(long, value_parser = parse_size)]
    pub memory: Option<u64>,
    /// With --memory: allocate all of the emulated device's memory at start (several times the
    /// volume's size at small sizes: the device also holds the spare), instead of on each
    /// block's first write, where it costs a page fault and a page clear. Use for benchmarks.
    #[arg(long, conflicts_with_all = ["device", "raizn", "zapraid"])]
    pub prefault: bool,
    /// Run requests on a thread of their own, beside the thread that reads and writes the
    /// sockets, so that the next requests are read while the last ones run. Off by default:
    /// on a loaded two-core machine the hand-offs between the threads cost more than the
    /// overlap saves (docs/BENCHMARKS.md).
    #[arg(long)]
    pub request_thread: bool,
    /// `tcp:HOST:PORT` or `unix:PATH`.
    #[arg(long, default_value = "tcp:127.0.0.1:10809")]
    pub listen: String,
    /// Allow listening on an address other than loopback (NBD has no authentication).
    #[arg(long)]
    pub allow_remote: bool,
    /// Export name.
    #[arg(long, default_value = "")]
    pub export: String,
    /// Delay completions in real time as this flash timing profile says (see `zonestack
    /// device profiles`); off by default. With --raizn or --zapraid every member is timed.
    #[arg(long, value_name = "PROFILE")]
    pub timing: Option<String>,
    /// Over-provisioning in percent, when the volume is formatted here.
    #[arg(long, default_value_t = 7.0)]
    pub op: f64,
    #[command(flatten)]
    pub mount: MountArgs,
    /// Export the host FTL on a RAIZN array instead: its member images in order, comma
    /// separated (made by `zonestack raizn create`; formatted on first use if empty).
    #[arg(long, value_delimiter = ',', value_name = "IMG,IMG,...", group = "array",
          conflicts_with_all = ["device", "memory"])]
    pub raizn: Vec<PathBuf>,
    /// Export a ZapRAID block volume instead (no FTL: ZapRAID is a block volume itself): its
    /// member images in order, comma separated (made by `zonestack zapraid format`;
    /// `missing` for an absent member: the array is served degraded).
    #[arg(long, value_delimiter = ',', value_name = "IMG,IMG,...", group = "array",
          conflicts_with_all = ["device", "memory", "raizn"])]
    pub zapraid: Vec<PathBuf>,
    /// Fault injection with --raizn or --zapraid: the member at this position (0-based) fails
    /// while serving: from its --fail-after-th command on, every command returns Namespace
    /// Not Ready.
    #[arg(long, requires = "array", requires = "fail_after")]
    pub fail_member: Option<usize>,
    /// With --fail-member: the command of that member, counted from the start of serving,
    /// that fails first (1 fails the first).
    #[arg(long, requires = "fail_member")]
    pub fail_after: Option<u64>,
}

fn other(e: impl std::fmt::Display) -> CliError {
    CliError::Other(e.to_string())
}

pub fn parse_listen(text: &str) -> Result<Listen, CliError> {
    if let Some(p) = text.strip_prefix("unix:") {
        // An empty path would bind an unnamed (abstract) socket that no client can name.
        if p.is_empty() {
            return Err(CliError::Usage(format!(
                "--listen '{text}' has no socket path; give one, e.g. unix:/tmp/zonestack.sock"
            )));
        }
        return Ok(Listen::Unix(PathBuf::from(p)));
    }
    if let Some(a) = text.strip_prefix("tcp:") {
        let addr: SocketAddr = a.parse().map_err(|_| {
            CliError::Usage(format!(
                "--listen {text}: expected tcp:HOST:PORT with a numeric address"
            ))
        })?;
        return Ok(Listen::Tcp(addr));
    }
    Err(CliError::Usage(format!(
        "--listen {text}: expected tcp:HOST:PORT or unix:PATH"
    )))
}

/// An in-memory device big enough for a `bytes` volume with `op_permille` spare.
fn memory_geometry(bytes: u64, op_permille: u32) -> Result<Geometry, CliError> {
    let mut g = emu::profile("small").unwrap_or_else(|| unreachable!("built-in profile"));
    let zone_blocks: u64 = if bytes >= 8 << 30 { 65_536 } else { 16_384 };
    g.zone_size = zone_blocks;
    g.zone_capacity = zone_blocks;
    let zones =
        ftl::Layout::zones_for_volume(g, bytes, op_permille, ftl::layout::RESERVE_ZONES_DEFAULT)
            .map_err(|e| CliError::Usage(format!("--memory {bytes}: {e}")))?;
    // Exactly the zones the layout needs: over-provisioning pays the open zones' tails, so
    // extra zones would only make the volume larger than asked.
    g.zone_count = zones.max(16);
    g.max_open = 14.min(g.zone_count);
    g.max_active = 14.min(g.zone_count);
    Ok(g)
}

/// Switches the timing model on when a profile was given (on an image only: a drive has
/// its own timing).
fn timed(dev: Opened, timing: Option<TimingProfile>) -> Result<Arc<Opened>, CliError> {
    match (timing, dev) {
        (Some(p), Opened::Image(img)) => {
            Ok(Arc::new(Opened::Image(crate::timing::enable(img, p)?)))
        }
        (Some(_), Opened::Drive(_)) => Err(crate::timing::not_on_drive()),
        (None, dev) => Ok(Arc::new(dev)),
    }
}

/// Formats a host FTL volume on `dev` when it holds none and every zone is Empty; refuses a
/// device that holds data but no volume. Returns what it did, for the banner.
async fn format_if_empty(
    dev: &dyn ZonedDevice,
    name: &str,
    op_permille: u32,
) -> Result<Option<String>, CliError> {
    let Err(e) = ftl::probe(dev).await else {
        return Ok(None);
    };
    let empty = dev
        .report_zones(0, zns::ReportFilter::State(zns::ZoneState::Empty), false, 0)
        .await?;
    if empty.nr_zones != u64::from(dev.geometry().zone_count) {
        return Err(CliError::Other(format!(
            "{name} holds data but no FTL volume ({e}); format it with `zonestack ftl format`"
        )));
    }
    ftl::format(
        dev,
        FormatOptions::with_op(op_permille),
        crate::cmd_ftl::new_volume_id(),
        false,
    )
    .await
    .map_err(other)?;
    // Formatting writes the image: say so rather than doing it silently.
    Ok(Some(format!(
        "it was empty: formatted a new volume, {}% over-provisioning",
        f64::from(op_permille) / 10.0
    )))
}

async fn device_for(
    a: &ServeArgs,
    op_permille: u32,
    timing: Option<TimingProfile>,
) -> Result<(Arc<Opened>, String), CliError> {
    match &a.device {
        Some(path) => {
            let dev = timed(commands::open(path)?, timing)?;
            let name = path.display().to_string();
            match format_if_empty(dev.as_ref(), &name, op_permille).await {
                Ok(Some(did)) => Ok((dev, format!("{name} ({did})"))),
                Ok(None) => Ok((dev, name)),
                Err(e) => Err(close_after(e, dev.shutdown().map_err(|c| c.message()))),
            }
        }
        None => {
            let bytes = a.memory.unwrap_or(1 << 30);
            if bytes < 1 << 20 || !bytes.is_multiple_of(4096) {
                return Err(CliError::Usage(format!(
                    "--memory {bytes}: give at least 1M, a multiple of 4K"
                )));
            }
            let g = memory_geometry(bytes, op_permille)?;
            let emu = EmuDevice::new_memory(EmuConfig::new(g)).map_err(other)?;
            let prefaulted = if a.prefault {
                format!(", {} allocated up front", format_size(emu.prefault()))
            } else {
                String::new()
            };
            let dev = timed(Opened::Image(emu), timing)?;
            let fmt = FormatOptions {
                op_permille,
                volume_blocks: Some(bytes / 4096),
                threaded_logging: false,
            };
            ftl::format(dev.as_ref(), fmt, crate::cmd_ftl::new_volume_id(), false)
                .await
                .map_err(other)?;
            Ok((
                dev,
                format!(
                    "memory ({} zones of {}{prefaulted})",
                    g.zone_count,
                    format_size(g.zone_size * u64::from(g.block_size))
                ),
            ))
        }
    }
}

/// `e`, with the cause when closing what was opened failed as well.
fn close_after<E: std::fmt::Display>(e: CliError, closed: Result<(), E>) -> CliError {
    match closed {
        Ok(()) => e,
        Err(c) => CliError::Other(format!("{}; closing the device: {c}", e.message())),
    }
}

/// What a served volume lives on, closed last at shutdown.
enum Backing {
    Device(Arc<Opened>),
    /// The member images of an array (the array itself is flushed before they close).
    Array(Members),
}

impl Backing {
    fn close(self) -> Result<(), String> {
        match self {
            Backing::Device(d) => d.shutdown().map_err(|e| e.message()),
            Backing::Array(m) => m.close().map_err(|e| e.message()),
        }
    }
}

/// The RAIZN array `--raizn` names, its members wrapped for `--fail-member` when asked.
async fn raizn_for(
    a: &ServeArgs,
    op_permille: u32,
    timing: Option<TimingProfile>,
) -> Result<(Arc<dyn ZonedDevice>, Backing, String), CliError> {
    let m = Members::open(&a.raizn, false, true)?.with_timing(timing)?;
    let r = async {
        let vol = Arc::new(open_faulty_array(a, &m).await?);
        let name = format!(
            "RAIZN array {}",
            crate::cmd_raizn::uuid_text(&vol.array_uuid())
        );
        let did = format_if_empty(vol.as_ref(), &name, op_permille).await?;
        let mut what = match did {
            Some(d) => format!("{name} ({d})"),
            None => name,
        };
        if let Some(f) = vol.failed_member() {
            what += &format!(", degraded: {} failed", m.name(f));
        }
        if let (Some(i), Some(n)) = (a.fail_member, a.fail_after) {
            what += &format!(", {} set to fail at its command {n}", m.name(i));
        }
        Ok((vol as Arc<dyn ZonedDevice>, what))
    }
    .await;
    match r {
        Ok((vol, what)) => Ok((vol, Backing::Array(m), what)),
        Err(e) => Err(close_after(e, m.close().map_err(|c| c.message()))),
    }
}

/// Opens the RAIZN array over `m`; with `--fail-member I --fail-after N`, member I is
/// wrapped so that its N-th command and every later one fail with Namespace Not Ready, as a
/// drive that dies does (the array degrades and goes on).
async fn open_faulty_array(a: &ServeArgs, m: &Members) -> Result<raizn::RaiznVolume, CliError> {
    let Some((devs, arm)) = faulty_members(a, m)? else {
        return crate::cmd_raizn::open_array(m).await;
    };
    let vol = raizn::RaiznVolume::open_degraded(devs)
        .await
        .map_err(|e| crate::cmd_raizn::raizn_error(m, e))?;
    arm()?;
    Ok(vol)
}

/// The members of an array for `--fail-member I --fail-after N` (None without them): member
/// I wrapped so that, once the returned function arms it (after the array is open, so the
/// count starts with serving), its N-th command and every later one fail with Namespace Not
/// Ready, as a drive that dies does.
#[allow(clippy::type_complexity)]
pub fn faulty_members(
    a: &ServeArgs,
    m: &Members,
) -> Result<
    Option<(
        Vec<Option<Arc<dyn ZonedDevice>>>,
        impl FnOnce() -> Result<(), CliError>,
    )>,
    CliError,
> {
    let (Some(i), Some(n)) = (a.fail_member, a.fail_after) else {
        return Ok(None);
    };
    if i >= m.devs.len() || n == 0 {
        return Err(CliError::Usage(format!(
            "--fail-member {i} --fail-after {n}: give a member position below {} and a \
             command count from 1",
            m.devs.len()
        )));
    }
    let mut devs: Vec<Option<Arc<dyn ZonedDevice>>> = m
        .devs
        .iter()
        .map(|d| d.clone().map(|d| d as Arc<dyn ZonedDevice>))
        .collect();
    let faulty = match devs.get(i).cloned().flatten() {
        Some(d) => Arc::new(zns::FaultyZoned::new(d, 0)),
        None => {
            return Err(CliError::Usage(format!(
                "--fail-member {i}: that member is missing"
            )))
        }
    };
    if let Some(slot) = devs.get_mut(i) {
        *slot = Some(faulty.clone());
    }
    let arm = move || {
        let plan = zns::ErrorPlan {
            ops: zns::OpSet::ALL,
            fail_nth: Some(n),
            repeat: u64::MAX - n,
            status: zns::NvmeStatus::NamespaceNotReady,
            ..zns::ErrorPlan::default()
        };
        faulty.set_errors(plan).map_err(CliError::Usage)
    };
    Ok(Some((devs, arm)))
}

/// Installs the SIGINT and SIGTERM handlers now (so a signal sent as soon as the server says it
/// listens is not the default kill) and returns the future that ends at the first of them.
pub fn signalled() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move { wait_for(handlers).await }
}

async fn wait_for(
    handlers: (
        std::io::Result<tokio::signal::unix::Signal>,
        std::io::Result<tokio::signal::unix::Signal>,
    ),
) {
    match handlers {
        (Ok(mut i), Ok(mut t)) => {
            let name = tokio::select! {
                _ = i.recv() => "SIGINT",
                _ = t.recv() => "SIGTERM",
            };
            info!("{name} received: stopping the NBD server");
        }
        // Without signal handlers the server runs until killed.
        _ => std::future::pending::<()>().await,
    }
}

/// The last two steps of a shutdown: flushing and checkpointing the volume, then closing the
/// device image or the array. Both run even when the first fails, so the images are closed
/// either way.
async fn close(vol: &FtlVolume, zoned: &dyn ZonedDevice, backing: Backing) -> Vec<String> {
    let mut problems = Vec::new();
    match vol.unmount().await {
        Ok(()) => info!("volume flushed and checkpointed"),
        Err(e) => problems.push(format!(
            "the volume could not be flushed and checkpointed: {e}"
        )),
    }
    if let Backing::Array(_) = backing {
        if let Err(e) = zoned.flush().await {
            problems.push(format!("the array could not be flushed: {e}"));
        }
    }
    match backing.close() {
        Ok(()) => info!("device closed"),
        Err(e) => problems.push(format!("the device image could not be closed: {e}")),
    }
    problems
}

/// The outcome of a stopped server: a clean stop is claimed only when every step worked;
/// otherwise the error names each step that failed, with its cause.
pub fn outcome(problems: Vec<String>, out: &mut impl Write) -> CliResult {
    if problems.is_empty() {
        writeln!(out, "stopped: volume flushed and checkpointed")?;
        return Ok(());
    }
    Err(CliError::Other(format!(
        "stopped with errors: {}",
        problems.join("; ")
    )))
}

/// The zoned device the FTL runs on, what it lives on, and its description.
async fn zoned_for(
    a: &ServeArgs,
    op_permille: u32,
    timing: Option<TimingProfile>,
) -> Result<(Arc<dyn ZonedDevice>, Backing, String), CliError> {
    if !a.raizn.is_empty() {
        let (vol, backing, mut what) = raizn_for(a, op_permille, timing).await?;
        if let Some(p) = &timing {
            what = format!("{what}, members with {}", crate::timing::describe(p));
        }
        return Ok((vol, backing, what));
    }
    let (dev, mut what) = device_for(a, op_permille, timing).await?;
    if let Some(p) = &timing {
        what = format!("{what} with {}", crate::timing::describe(p));
    }
    Ok((dev.clone(), Backing::Device(dev), what))
}

fn server_config(a: &ServeArgs, listen: Listen) -> ServerConfig {
    ServerConfig {
        export_name: a.export.clone(),
        listen,
        allow_remote: a.allow_remote,
        multi_conn: true,
        request_thread: a.request_thread,
        ..ServerConfig::default()
    }
}

pub async fn run(a: &ServeArgs, out: &mut impl Write) -> CliResult {
    if !(1.0..=90.0).contains(&a.op) {
        return Err(CliError::Usage(format!(
            "--op {} is outside 1..=90 percent",
            a.op
        )));
    }
    let listen = parse_listen(&a.listen)?;
    if !a.zapraid.is_empty() {
        return crate::serve_zapraid::run(a, server_config(a, listen), out).await;
    }
    let timing = a
        .timing
        .as_deref()
        .map(crate::timing::profile_named)
        .transpose()?;
    let op_permille = (a.op * 10.0).round() as u32;
    let (zoned, backing, what) = zoned_for(a, op_permille, timing).await?;
    let opts = match &backing {
        Backing::Device(d) => d.fit_mount_options(a.mount.options()),
        Backing::Array(_) => Ok(a.mount.options()),
    };
    let opts = match opts {
        Ok(o) => o,
        Err(e) => return Err(close_after(e, backing.close())),
    };
    let (vol, report) = match FtlVolume::mount(zoned.clone(), opts).await {
        Ok(m) => m,
        Err(e) => {
            return Err(close_after(CliError::Other(e.to_string()), backing.close()));
        }
    };
    let blockdev: Arc<dyn BlockDevice> = vol.clone();
    let server = match NbdServer::bind(server_config(a, listen), blockdev) {
        Ok(s) => s,
        Err(e) => {
            let mut problems = vec![e.to_string()];
            problems.extend(close(&vol, zoned.as_ref(), backing).await);
            return Err(CliError::Other(problems.join("; ")));
        }
    };
    let size = format_size(vol.size_blocks() * u64::from(vol.block_size()));
    let g = zoned.geometry();
    info!(
        "serving a {size} FTL volume at {} on {what}: {} zones of {} blocks ({} writable), \
         {}-byte blocks, {} open / {} active",
        server.local_uri(),
        g.zone_count,
        g.zone_size,
        g.zone_capacity,
        g.block_size,
        g.max_open,
        g.max_active
    );
    // Regression: the handlers were installed only once serving began, after the URI was
    // printed, so a SIGTERM sent right after it killed the server without a checkpoint.
    let stop = signalled();
    writeln!(
        out,
        "serving {size} FTL volume on {what} (recovery scanned {} blocks)\n{}",
        report.scanned_blocks,
        server.local_uri()
    )?;
    out.flush()?;
    let served = server.serve_until(stop).await;
    info!("NBD server stopped: flushing and checkpointing the volume");
    let mut problems = Vec::new();
    if let Err(e) = served {
        problems.push(format!("the NBD server failed: {e}"));
    }
    problems.extend(close(&vol, zoned.as_ref(), backing).await);
    outcome(problems, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_stop_is_claimed_only_when_every_step_worked() {
        // `serve` must not print "flushed and checkpointed" when a step of its shutdown
        // failed, and its error must name every failed step with its cause.
        let mut out = Vec::new();
        assert!(outcome(Vec::new(), &mut out).is_ok());
        assert_eq!(out, b"stopped: volume flushed and checkpointed\n");
        let mut out = Vec::new();
        let problems = vec![
            "checkpoint: Zone Is Read Only".to_string(),
            "close: EIO".to_string(),
        ];
        let e = outcome(problems, &mut out)
            .err()
            .map(|e| (e.exit_code(), e.message()));
        assert_eq!(
            e,
            Some((
                1,
                "stopped with errors: checkpoint: Zone Is Read Only; close: EIO".to_string()
            ))
        );
        assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn an_empty_unix_path_is_a_usage_error() {
        assert!(matches!(parse_listen("unix:"), Err(CliError::Usage(_))));
        assert!(matches!(parse_listen("unix:/tmp/s"), Ok(Listen::Unix(_))));
    }

    #[test]
    fn every_timing_profile_accepts_the_memory_geometry() {
        // `serve --memory SIZE --timing PROFILE` must start for every size and profile: the
        // model refuses a geometry whose active zones its write buffer cannot serve.
        for bytes in [1u64 << 20, 1 << 30, 16 << 30] {
            let g = memory_geometry(bytes, 70).expect("a memory geometry");
            for p in emu::timing::timing_profiles() {
                let t = emu::timing::ZonedTiming::new(p, g, false).map(|_| ());
                assert_eq!(t, Ok(()), "{} on {bytes} bytes", p.name);
            }
        }
    }
}
