//! The geometry of a zoned block device from its sysfs queue attributes
//! (/sys/block/NAME/queue/*). Parsing and the geometry are sans-IO: [`QueueLimits::parse`]
//! takes a lookup function, so tests feed it a table.

use zns::Geometry;

/// What sysfs says about a block device's queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// "host-managed", "host-aware" or "none".
    pub zoned: String,
    pub logical_block_size: u32,
    /// Zone size in 512-byte sectors.
    pub chunk_sectors: u64,
    pub nr_zones: u32,
    /// 0 = no limit, as the kernel reports it (and as `Geometry` counts).
    pub max_open_zones: u32,
    pub max_active_zones: u32,
    /// 0 = the device cannot append.
    pub zone_append_max_bytes: u64,
    /// Largest request the block layer sends the device, in KiB.
    pub max_sectors_kb: u64,
}

/// Why sysfs did not describe a usable zoned device.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SysfsError {
    #[error(
        "sysfs attribute queue/{0} is missing (is this a whole block device, not a partition?)"
    )]
    Missing(&'static str),
    #[error("sysfs attribute queue/{attr} is {value:?}, not a number")]
    NotANumber { attr: &'static str, value: String },
    #[error(
        "the device is not host-managed zoned (queue/zoned is {0:?}); use an image or a ZNS drive"
    )]
    NotZoned(String),
    #[error("zone capacity {capacity_blocks} blocks differs between zones or exceeds the zone size {zone_blocks}; zonestack needs one capacity for every zone")]
    Capacity {
        capacity_blocks: u64,
        zone_blocks: u64,
    },
    #[error("{0}")]
    Geometry(String),
}

impl QueueLimits {
    /// Reads the attributes through `attr` (the text of queue/NAME, if the file exists).
    pub fn parse(attr: impl Fn(&str) -> Option<String>) -> Result<QueueLimits, SysfsError> {
        let text = |name: &'static str| -> Result<String, SysfsError> {
            attr(name)
                .map(|s| s.trim().to_string())
                .ok_or(SysfsError::Missing(name))
        };
        let num = |name: &'static str| -> Result<u64, SysfsError> {
            let value = text(name)?;
            value
                .parse()
                .map_err(|_| SysfsError::NotANumber { attr: name, value })
        };
        // Older kernels lack the zone resource and append limits: no limit / no append.
        let opt = |name: &'static str| -> Result<u64, SysfsError> {
            match attr(name) {
                None => Ok(0),
                Some(_) => num(name),
            }
        };
        let small = |name: &'static str, v: u64| {
            u32::try_from(v).map_err(|_| SysfsError::NotANumber {
                attr: name,
                value: v.to_string(),
            })
        };
        Ok(QueueLimits {
            zoned: text("zoned")?,
            logical_block_size: small("logical_block_size", num("logical_block_size")?)?,
            chunk_sectors: num("chunk_sectors")?,
            nr_zones: small("nr_zones", num("nr_zones")?)?,
            max_open_zones: small("max_open_zones", opt("max_open_zones")?)?,
            max_active_zones: small("max_active_zones", opt("max_active_zones")?)?,
            zone_append_max_bytes: opt("zone_append_max_bytes")?,
            max_sectors_kb: num("max_sectors_kb")?,
        })
    }

    /// The geometry, given the capacity every zone reports (in blocks).
    pub fn geometry(&self, capacity_blocks: u64) -> Result<Geometry, SysfsError> {
        if self.zoned != "host-managed" {
            return Err(SysfsError::NotZoned(self.zoned.clone()));
        }
        let bs = u64::from(self.logical_block_size);
        if bs < 512 || bs % 512 != 0 {
            return Err(SysfsError::Geometry(format!(
                "logical block size {bs} is not a multiple of 512"
            )));
        }
        let zone_size = self.chunk_sectors * 512 / bs;
        if capacity_blocks == 0 || capacity_blocks > zone_size {
            return Err(SysfsError::Capacity {
                capacity_blocks,
                zone_blocks: zone_size,
            });
        }
        let mdts_blocks =
            u32::try_from((self.max_sectors_kb * 1024 / bs).max(1)).unwrap_or(u32::MAX);
        // Without append support the limit is still one block so that the geometry validates;
        // append itself fails with a named capability (device.rs).
        let zasl_blocks =
            u32::try_from((self.zone_append_max_bytes / bs).clamp(1, u64::from(mdts_blocks)))
                .unwrap_or(mdts_blocks);
        // A device with only an active limit can have no more zones open than active.
        let max_open = match (self.max_open_zones, self.max_active_zones) {
            (0, a) => a,
            (o, _) => o,
        };
        let geo = Geometry {
            block_size: self.logical_block_size,
            // The block device interface carries no per-block metadata.
            oob_size: 0,
            zone_count: self.nr_zones,
            zone_size,
            zone_capacity: capacity_blocks,
            max_open,
            max_active: self.max_active_zones,
            zasl_blocks,
            mdts_blocks,
            // Simple Copy is not reachable through the block layer: the smallest valid limits.
            copy_max_ranges: 1,
            copy_max_range_blocks: 1,
            copy_max_blocks: 1,
            // The block layer splits every request at zone boundaries (chunk_sectors), so a
            // read across zones reaches the device as one read per zone and succeeds.
            cross_zone_reads: true,
        };
        geo.validate()
            .map_err(|e| SysfsError::Geometry(e.to_string()))?;
        Ok(geo)
    }
}

/// Reads the queue attributes of the block device numbered `major:minor` from the live
/// sysfs (/sys/dev/block/MAJOR:MINOR/queue), which names the device whatever path opened it.
pub fn read_queue(major: u32, minor: u32) -> Result<QueueLimits, SysfsError> {
    let dir = std::path::PathBuf::from(format!("/sys/dev/block/{major}:{minor}/queue"));
    QueueLimits::parse(|attr| std::fs::read_to_string(dir.join(attr)).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), format!("{v}\n")))
            .collect();
        move |name| {
            owned
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    const QEMU_ZNS: &[(&str, &str)] = &[
        ("zoned", "host-managed"),
        ("logical_block_size", "4096"),
        ("chunk_sectors", "2048"),
        ("nr_zones", "8"),
        ("max_open_zones", "4"),
        ("max_active_zones", "6"),
        ("zone_append_max_bytes", "524288"),
        ("max_sectors_kb", "512"),
    ];

    #[test]
    fn qemu_zns_queue_gives_its_geometry() {
        let g = QueueLimits::parse(table(QEMU_ZNS))
            .unwrap()
            .geometry(192)
            .unwrap();
        assert_eq!(
            (g.block_size, g.zone_size, g.zone_capacity, g.zone_count),
            (4096, 256, 192, 8)
        );
        assert_eq!(
            (g.max_open, g.max_active, g.zasl_blocks, g.mdts_blocks),
            (4, 6, 128, 128)
        );
        assert_eq!(g.oob_size, 0);
    }

    #[test]
    fn refuses_non_zoned_missing_and_bad_attributes() {
        let mut t = QEMU_ZNS.to_vec();
        t[0] = ("zoned", "none");
        assert_eq!(
            QueueLimits::parse(table(&t)).unwrap().geometry(192),
            Err(SysfsError::NotZoned("none".into()))
        );
        assert_eq!(
            QueueLimits::parse(table(&QEMU_ZNS[..2])),
            Err(SysfsError::Missing("chunk_sectors"))
        );
        let mut t = QEMU_ZNS.to_vec();
        t[3] = ("nr_zones", "many");
        assert!(matches!(
            QueueLimits::parse(table(&t)),
            Err(SysfsError::NotANumber {
                attr: "nr_zones",
                ..
            })
        ));
        let q = QueueLimits::parse(table(QEMU_ZNS)).unwrap();
        assert!(matches!(q.geometry(257), Err(SysfsError::Capacity { .. })));
    }

    #[test]
    fn old_kernels_without_limits_mean_unlimited_and_no_append() {
        let t: Vec<_> = QEMU_ZNS
            .iter()
            .copied()
            .filter(|(k, _)| {
                !k.starts_with("max_open")
                    && !k.starts_with("max_active")
                    && !k.starts_with("zone_append")
            })
            .collect();
        let g = QueueLimits::parse(table(&t))
            .unwrap()
            .geometry(256)
            .unwrap();
        assert_eq!((g.max_open, g.max_active, g.zasl_blocks), (0, 0, 1));
    }
}
