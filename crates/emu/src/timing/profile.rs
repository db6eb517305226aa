//! Timing profiles: the flash array, controller and host interface of a modelled SSD, and
//! the named profiles with the sources their numbers come from (docs/BENCHMARKS.md has the
//! full table and the calibration runs).

use crate::timing::resource::transfer_ns;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// Every parameter of the timing model. Times are nanoseconds, rates bytes per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimingProfile {
    pub name: &'static str,
    /// Flash channels; each carries one transfer at a time.
    pub channels: u32,
    /// Dies (ways) on each channel; each die runs one read, program or erase at a time.
    pub dies_per_channel: u32,
    /// Planes per die, programmed and read together (multi-plane operations).
    pub planes: u32,
    pub page_bytes: u32,
    pub pages_per_block: u32,
    pub blocks_per_die: u32,
    /// Page read (tR): array to page register.
    pub page_read_ns: u64,
    /// Program of one page on every plane (tPROG).
    pub page_program_ns: u64,
    /// Erase of one block on every plane (tBERS).
    pub block_erase_ns: u64,
    /// Copyback of one page on every plane: read and program inside a die, no transfer.
    pub copyback_ns: u64,
    pub channel_bytes_per_sec: u64,
    /// Host interface (PCIe) bandwidth, each direction.
    pub host_bytes_per_sec: u64,
    /// Device DRAM that holds written data until it is programmed.
    pub write_buffer_bytes: u64,
    /// Dies one zone stripes over; 0 means every die. Must divide the die count.
    pub zone_dies: u32,
    /// Fixed latency before the controller sees a command (doorbell, fetch, host driver).
    pub submit_ns: u64,
    /// Fixed latency from the end of a command to the host seeing its completion.
    pub complete_ns: u64,
    /// Controller (firmware) time per command, by kind; the controller runs one at a time.
    pub ctrl_read_ns: u64,
    pub ctrl_write_ns: u64,
    pub ctrl_append_ns: u64,
    /// Flush, zone management, report, copy set-up, and rejected commands.
    pub ctrl_admin_ns: u64,
    /// A zone's append sequencer: fixed time per append to that zone, one at a time per zone.
    /// 0 with a rate of 0 disables the stage.
    pub zone_append_ns: u64,
    pub zone_append_bytes_per_sec: u64,
}

impl TimingProfile {
    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    /// Bytes programmed by one die operation: a page on every plane. Zones stripe over dies
    /// in units of this size.
    pub fn unit_bytes(&self) -> u64 {
        u64::from(self.planes) * u64::from(self.page_bytes)
    }

    /// Bytes of one erase block on every plane of a die.
    pub fn block_bytes(&self) -> u64 {
        self.unit_bytes() * u64::from(self.pages_per_block)
    }

    /// Dies a zone stripes over.
    pub fn dies_per_zone(&self) -> u32 {
        if self.zone_dies == 0 {
            self.dies()
        } else {
            self.zone_dies
        }
    }

    /// Raw flash bytes of the whole array.
    pub fn raw_bytes(&self) -> u64 {
        self.block_bytes() * u64::from(self.blocks_per_die) * u64::from(self.dies())
    }

    /// Sustained program bandwidth of the array, bytes per second (every die busy).
    pub fn program_bytes_per_sec(&self) -> f64 {
        self.unit_bytes() as f64 * f64::from(self.dies()) * 1e9 / self.page_program_ns as f64
    }

    pub fn validate(&self) -> Result<(), String> {
        let nonzero = [
            ("channels", u64::from(self.channels)),
            ("dies per channel", u64::from(self.dies_per_channel)),
            ("planes", u64::from(self.planes)),
            ("page size", u64::from(self.page_bytes)),
            ("pages per block", u64::from(self.pages_per_block)),
            ("blocks per die", u64::from(self.blocks_per_die)),
            ("page program latency", self.page_program_ns),
            ("channel rate", self.channel_bytes_per_sec),
            ("host interface rate", self.host_bytes_per_sec),
        ];
        if let Some((name, _)) = nonzero.iter().find(|(_, v)| *v == 0) {
            return Err(format!("timing profile {}: {name} must be > 0", self.name));
        }
        if self.zone_dies != 0 && !self.dies().is_multiple_of(self.zone_dies) {
            return Err(format!(
                "timing profile {}: {} dies per zone does not divide {} dies",
                self.name,
                self.zone_dies,
                self.dies()
            ));
        }
        Ok(())
    }

    /// The copyback latency ZNS+ Table 2 gives as a fraction of a read-and-program copy
    /// through the controller (read, two page transfers, program).
    fn copyback_from_ratio(mut self, ratio: f64) -> TimingProfile {
        let xfer = transfer_ns(self.unit_bytes(), self.channel_bytes_per_sec);
        let via_controller = self.page_read_ns + 2 * xfer + self.page_program_ns;
        self.copyback_ns = (via_controller as f64 * ratio).round() as u64;
        self
    }
}

/// Western Digital Ultrastar DC ZN540, fitted to the papers' measurements (see
/// docs/BENCHMARKS.md, "Timing profiles"). The flash layout is a plausible TLC drive, not the
/// vendor's (which is not public); the numbers that matter were fitted:
/// - host interface 3,265 MiB/s: RAIZN section 6.1, raw sequential read;
/// - program latency: array program bandwidth 1,052 MiB/s, RAIZN 6.1 raw sequential write
///   and ZapRAID Fig. 1a 16 KiB (1,050 MiB/s);
/// - controller write cost: 777.2 MiB/s of 4 KiB writes at six zones (ZapRAID Fig. 1b),
///   about 200K IOPS (vroom thesis 5.2.1);
/// - submit + complete latency: 337.6 MiB/s at QD1 4 KiB (ZapRAID Fig. 1a);
/// - controller append cost: 577.5 MiB/s of 4 KiB appends at two zones (ZapRAID Fig. 1b),
///   about 150K IOPS (vroom 5.2.1);
/// - zone append sequencer: 541.5 / 1,026.7 MiB/s for 4 / 8 KiB appends at QD4 in one zone
///   (ZapRAID Fig. 1a), traded against vroom's ~150K intra-zone IOPS;
/// - page read latency: 85 us for a 4 KiB random read (ZNS paper section 5.1).
pub fn zn540() -> TimingProfile {
    TimingProfile {
        name: "zn540",
        channels: 8,
        dies_per_channel: 4,
        planes: 2,
        page_bytes: 16 * KIB as u32,
        pages_per_block: 1152,
        blocks_per_die: 1700,
        page_read_ns: 74_043,
        page_program_ns: 950_604,
        block_erase_ns: 3_500_000,
        copyback_ns: 0,
        channel_bytes_per_sec: 1_200_000_000,
        host_bytes_per_sec: 3265 * MIB,
        write_buffer_bytes: 8 * MIB,
        zone_dies: 0,
        submit_ns: 3_000,
        complete_ns: 2_348,
        ctrl_read_ns: 1_000,
        ctrl_write_ns: 5_026,
        ctrl_append_ns: 6_766,
        ctrl_admin_ns: 2_000,
        zone_append_ns: 6_279,
        zone_append_bytes_per_sec: 6_160_000_000,
    }
    .copyback_from_ratio(0.94)
}

/// The FEMU configurations of ZNS+ (OSDI '21) Table 2: 16 KiB pages, 128 pages per block,
/// 16 chips on 8 channels x 2 ways, one plane, PCIe Gen2 x2 (1.2 GB/s), zones striped over
/// all 16 chips (32 MiB zones), 16 GB. Erase latency, controller costs and the write buffer
/// are not in the paper; the values here are assumptions (docs/BENCHMARKS.md).
fn femu(name: &'static str, read_us: f64, program_us: f64, dma_us: f64) -> TimingProfile {
    let page = 16 * KIB;
    TimingProfile {
        name,
        channels: 8,
        dies_per_channel: 2,
        planes: 1,
        page_bytes: page as u32,
        pages_per_block: 128,
        blocks_per_die: 512,
        page_read_ns: (read_us * 1000.0) as u64,
        page_program_ns: (program_us * 1000.0) as u64,
        block_erase_ns: 3_000_000,
        copyback_ns: 0,
        channel_bytes_per_sec: (page as f64 / (dma_us * 1e-6)).round() as u64,
        host_bytes_per_sec: 1_200_000_000,
        write_buffer_bytes: 4 * MIB,
        zone_dies: 0,
        submit_ns: 2_000,
        complete_ns: 2_000,
        ctrl_read_ns: 1_000,
        ctrl_write_ns: 1_000,
        ctrl_append_ns: 1_000,
        ctrl_admin_ns: 1_000,
        zone_append_ns: 0,
        zone_append_bytes_per_sec: 0,
    }
}

/// Every named timing profile.
pub fn timing_profiles() -> Vec<TimingProfile> {
    vec![
        zn540(),
        femu("femu-mlc", 35.0, 390.0, 24.0).copyback_from_ratio(0.90),
        femu("femu-tlc", 60.0, 700.0, 24.0).copyback_from_ratio(0.94),
        femu("znand", 3.0, 100.0, 3.4).copyback_from_ratio(0.94),
    ]
}

/// Looks a timing profile up by name.
pub fn timing_profile(name: &str) -> Option<TimingProfile> {
    timing_profiles().into_iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_profiles_are_valid_and_match_their_sources() {
        for p in timing_profiles() {
            assert_eq!(p.validate(), Ok(()), "{}", p.name);
            assert!(p.copyback_ns > 0 && p.copyback_ns < p.page_read_ns + p.page_program_ns * 2);
        }
        let z = zn540();
        // The array's program bandwidth is the drive's raw sequential write (RAIZN 6.1).
        let mibps = z.program_bytes_per_sec() / MIB as f64;
        assert!((mibps - 1052.0).abs() < 1.0, "{mibps}");
        let tlc = timing_profile("femu-tlc").map(|p| (p.dies(), p.unit_bytes()));
        assert_eq!(tlc, Some((16, 16 * KIB)));
        // 16 chips x one 2 MiB block: the 32 MiB zone of ZNS+ section 4.
        let mlc = timing_profile("femu-mlc").map(|p| p.block_bytes() * u64::from(p.dies()));
        assert_eq!(mlc, Some(32 * MIB));
        assert!(timing_profile("nope").is_none());
        let bad = TimingProfile { zone_dies: 5, ..z };
        assert!(bad.validate().is_err());
        let bad = TimingProfile { channels: 0, ..z };
        assert!(bad.validate().is_err());
    }
}
