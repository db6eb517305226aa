//! `zonestack`: the command-line tool of the zonestack storage stack.

mod args;
mod bench_drive;
mod bench_emu;
mod bench_ftl;
mod bench_ftl_mount;
mod bench_jobfile;
mod bench_paper;
mod cmd_ftl;
mod cmd_raizn;
mod cmd_zapraid;
mod commands;
mod device_check;
mod error;
mod lines;
mod logging;
mod members;
mod opened;
mod plot;
mod quickstart;
mod raizn_inspect;
mod raizn_rebuild;
mod serve;
mod serve_zapraid;
mod session;
mod timing;
mod units;
mod zapraid_replace;
mod zone_plus;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Cmd, DeviceCmd};
use crate::error::CliError;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = logging::init(cli.log_level) {
        eprintln!("zonestack: {}", e.message());
        return ExitCode::from(e.exit_code());
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("zonestack: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ CliError::BrokenPipe) => ExitCode::from(e.exit_code()),
        Err(e) => {
            eprintln!("zonestack: {}", e.message());
            ExitCode::from(e.exit_code())
        }
    }
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match cli.cmd {
        Cmd::Quickstart(a) => quickstart::run(&a, &mut out).await,
        Cmd::Device(DeviceCmd::Create(a)) => commands::create(&a, &mut out),
        Cmd::Device(DeviceCmd::Profiles) => commands::list_profiles(&mut out),
        Cmd::Device(DeviceCmd::Check(a)) => device_check::run(&a, &mut out).await,
        Cmd::Session {
            path,
            raizn,
            timing,
        } => {
            // An unknown profile is refused before the image is opened.
            let profile = timing.as_deref().map(timing::profile_named).transpose()?;
            let Some(path) = path else {
                let m = members::Members::open(&raizn, false, true)?.with_timing(profile)?;
                return session::run_array(m, std::io::stdin().lock(), &mut out).await;
            };
            let mut dev = commands::open(&path)?;
            if let Some(p) = profile {
                dev = match dev {
                    opened::Opened::Image(img) => opened::Opened::Image(timing::enable(img, p)?),
                    opened::Opened::Drive(_) => return Err(timing::not_on_drive()),
                };
            }
            session::run(&dev, &path, std::io::stdin().lock(), &mut out).await
        }
        Cmd::Bench(args::BenchCmd::Emu(a)) => bench_emu::run(&a, &mut out).await,
        Cmd::Bench(args::BenchCmd::Ftl(a)) => bench_ftl::run(&a, &mut out).await,
        Cmd::Bench(args::BenchCmd::FtlMount(a)) => bench_ftl::run_mount(&a, &mut out).await,
        Cmd::Ftl(c) => cmd_ftl::run(&c, &mut out).await,
        Cmd::Raizn(c) => cmd_raizn::run(&c, &mut out).await,
        Cmd::Zapraid(c) => cmd_zapraid::run(&c, &mut out).await,
        cmd if commands::target_of(&cmd).is_some_and(|t| !t.raizn.is_empty()) => {
            cmd_raizn::run_zoned(&cmd, &mut out).await
        }
        Cmd::Serve(a) => serve::run(&a, &mut out).await,
        Cmd::Bench(args::BenchCmd::Paper(a)) => bench_paper::run(&a, &mut out).await,
        Cmd::Bench(args::BenchCmd::JobFile(words)) => bench_jobfile::run_args(&words, &mut out),
        cmd => {
            let path = commands::path_of(&cmd).to_path_buf();
            let dev = if commands::is_read_only(&cmd) {
                commands::open_read_only(&path)?
            } else {
                commands::open(&path)?
            };
            let r = commands::execute(&dev, &path, &cmd, &mut out)
                .await
                .map_err(|e| dev.with_host_error(e));
            dev.shutdown().map_err(|e| {
                CliError::Other(format!("closing {}: {}", path.display(), e.message()))
            })?;
            r
        }
    }
}
