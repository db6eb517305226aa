//! The member images of a RAID array (RAIZN or ZapRAID) as the command line names them: a
//! list of device image paths in array order, where the word `missing` stands for a member
//! that is gone (mdadm's convention). Opening and closing them as one unit.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use emu::timing::TimingProfile;

use crate::commands;
use crate::error::CliError;
use crate::opened::Opened;

/// The word that names an absent member in a member list.
pub const MISSING: &str = "missing";

/// The opened member images of an array, in order; None for a `missing` member.
pub struct Members {
    pub paths: Vec<PathBuf>,
    pub devs: Vec<Option<Arc<Opened>>>,
}

/// Whether `path` is the `missing` placeholder rather than an image.
pub fn is_missing(path: &Path) -> bool {
    path.as_os_str() == MISSING
}

impl Members {
    /// Opens every member image (read-only when `read_only`). A path that does not exist is an
    /// error naming it (a typo must not turn a member into a failed one); only the word
    /// `missing` makes a member absent, and only when `allow_missing`.
    pub fn open(paths: &[PathBuf], read_only: bool, allow_missing: bool) -> Result<Self, CliError> {
        let mut devs = Vec::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            if is_missing(p) {
                if !allow_missing {
                    return Err(CliError::Usage(format!(
                        "member {i} is `{MISSING}`: this command needs every member image"
                    )));
                }
                devs.push(None);
                continue;
            }
            let dev = if read_only {
                commands::open_read_only(p)
            } else {
                commands::open(p)
            };
            match dev {
                Ok(d) => devs.push(Some(Arc::new(d))),
                Err(e) => {
                    // The images opened so far are closed before the error is returned.
                    let opened = Members {
                        paths: paths.to_vec(),
                        devs,
                    };
                    opened.close()?;
                    return Err(e);
                }
            }
        }
        Ok(Members {
            paths: paths.to_vec(),
            devs,
        })
    }

    /// Member `i`'s name for messages: "member 1 (b.img)".
    pub fn name(&self, i: usize) -> String {
        match self.paths.get(i) {
            Some(p) => format!("member {i} ({})", p.display()),
            None => format!("member {i}"),
        }
    }

    /// The members as zoned devices, for a volume that needs every one of them.
    pub fn all(&self) -> Result<Vec<Arc<dyn zns::ZonedDevice>>, CliError> {
        self.devs
            .iter()
            .enumerate()
            .map(|(i, d)| match d {
                Some(d) => Ok(d.clone() as Arc<dyn zns::ZonedDevice>),
                None => Err(CliError::Usage(format!(
                    "member {i} is `{MISSING}`: this array needs every member image"
                ))),
            })
            .collect()
    }

    /// Switches the timing model on for every member image when a profile is given, so an
    /// array is served as if its members were drives of that profile. A member that is a real
    /// drive refuses (it has its own timing); the members are closed on any error.
    pub fn with_timing(self, timing: Option<TimingProfile>) -> Result<Self, CliError> {
        let Some(p) = timing else {
            return Ok(self);
        };
        let Members { paths, devs } = self;
        let mut timed = Vec::with_capacity(devs.len());
        let mut failed = None;
        for (i, d) in devs.into_iter().enumerate() {
            let Some(d) = d else {
                timed.push(None);
                continue;
            };
            if failed.is_some() {
                timed.push(Some(d));
                continue;
            }
            // Just opened: this is the only reference, so the device can be taken back out.
            match Arc::try_unwrap(d) {
                Ok(Opened::Image(img)) => match crate::timing::enable(img, p) {
                    Ok(img) => timed.push(Some(Arc::new(Opened::Image(img)))),
                    // The device was consumed by the failed switch and closed with it.
                    Err(e) => failed = Some((i, e)),
                },
                Ok(drive @ Opened::Drive(_)) => {
                    timed.push(Some(Arc::new(drive)));
                    failed = Some((i, crate::timing::not_on_drive()));
                }
                Err(shared) => {
                    timed.push(Some(shared));
                    failed = Some((
                        i,
                        CliError::Other("a member image is shared; cannot time it".into()),
                    ));
                }
            }
        }
        let m = Members { paths, devs: timed };
        match failed {
            None => Ok(m),
            Some((i, e)) => {
                let e = CliError::Usage(format!("{}: {}", m.name(i), e.message()));
                m.close()?;
                Err(e)
            }
        }
    }

    /// The members as zoned devices, None for a `missing` one.
    pub fn zoned(&self) -> Vec<Option<Arc<dyn zns::ZonedDevice>>> {
        self.devs
            .iter()
            .map(|d| d.clone().map(|d| d as Arc<dyn zns::ZonedDevice>))
            .collect()
    }

    /// Closes every image; the error names each image that could not be closed. Every image
    /// is closed even when one fails.
    pub fn close(self) -> Result<(), CliError> {
        let mut problems = Vec::new();
        for (p, d) in self.paths.iter().zip(self.devs) {
            if let Some(d) = d {
                if let Err(e) = d.shutdown() {
                    problems.push(format!("closing {}: {}", p.display(), e.message()));
                }
            }
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(CliError::Other(problems.join("; "))),
        }
    }
}

/// Ends `r` with closing `m`: `r`'s error wins; a close error is reported when `r` worked.
pub fn finish<T>(m: Members, r: Result<T, CliError>) -> Result<T, CliError> {
    let closed = m.close();
    let v = r?;
    closed?;
    Ok(v)
}

/// A first non-empty zone of `dev`, as "zone 5 is full", or None when every zone is Empty.
pub async fn first_used_zone(dev: &dyn zns::ZonedDevice) -> Result<Option<String>, CliError> {
    let r = dev
        .report_zones(0, zns::ReportFilter::All, false, usize::MAX)
        .await?;
    Ok(r.zones
        .iter()
        .enumerate()
        .find(|(_, z)| z.state != zns::ZoneState::Empty)
        .map(|(i, z)| format!("zone {i} is {}", z.state.name())))
}
