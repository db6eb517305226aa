//! `ZapRaidVolume`: the async shell that does the member I/O around the sans-IO core
//! (docs/DESIGN.md, "ZapRAID").
//!
//! Fault model: a member command may fail (any status, including power loss: Commands
//! Aborted); power loss keeps a prefix of every member zone (what was flushed at least). A
//! failed write, flush or zone command fails its member (`members.rs`): the failure is
//! recorded on every survivor and the volume goes on without it, writing stripes without
//! its block and rebuilding its blocks on reads; a second failure (beyond `m`) fails the
//! volume: every later command returns `Failed` naming both members. A failed read is served
//! by reconstruction from the other members (degraded read). Nothing returns data the array
//! did not hold for that LBA.
//!
//! Lock order: `Shared::write_gate` (async; client writes shared, a recovery's last step
//! exclusive) before `Shared::gc_lock` (async, held across a whole collection) before
//! `Shared::state_lock` (async, held while a state stripe is written and flushed) before
//! `Shared::io_gate` (async; reads shared, a collection's reset exclusive) before
//! `Shared::st` (the index and the write state), a leaf lock never held across an await;
//! `SegWriter::records`, `gc_policy` and `admission` are only taken without `st`.

mod gc;
mod inband;
mod members;
mod read;
mod rebuild;
mod recover;
mod resume;
mod signal;
mod write;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use zns::{BlockDevice, BlockError, BlockResult, Lba, NvmeStatus, ZonedDevice};

use crate::index::{GcPolicy, Index};
use crate::layout::{GroupMode, Layout, LayoutError, RecordPlace};
pub use rebuild::RecoveryProgress;

/// Options of `ZapRaidVolume::format`.
#[derive(Clone, Debug)]
pub struct FormatOptions {
    /// Data blocks per stripe, at least 2.
    pub k: u32,
    /// Parity blocks per stripe; 1 (XOR).
    pub m: u32,
    pub mode: GroupMode,
    /// Where block records go: per-block metadata, or in-band (group summaries), the
    /// default choosing in-band only for members with too little metadata.
    pub records: RecordPlace,
    /// Space kept back from clients, in permille of the data capacity of all segments but the
    /// open one and the three collection keeps free.
    pub op_permille: u32,
    /// Format even over members holding data (every zone is reset).
    pub force: bool,
    /// Identifies the array; every segment header carries it.
    pub uuid: [u8; 16],
}

impl FormatOptions {
    pub fn new(k: u32, m: u32) -> FormatOptions {
        FormatOptions {
            k,
            m,
            mode: GroupMode::DEFAULT,
            records: RecordPlace::Auto,
            op_permille: 100,
            force: false,
            uuid: *b"zonestack-zapr01",
        }
    }
}

/// Errors of format and open.
#[derive(Debug, thiserror::Error)]
pub enum ZapRaidError {
    #[error("{0}")]
    Layout(#[from] LayoutError),
    #[error("member {member}: {what}: {status}")]
    Device {
        member: usize,
        what: String,
        status: NvmeStatus,
    },
    #[error("member {member} holds data (zone {zone} is {state}); pass force to format over it")]
    NotEmpty {
        member: usize,
        zone: u32,
        state: zns::ZoneState,
    },
    /// A replacement holds data that is not this array's member at that position.
    #[error("the replacement holds data (zone {zone} is {state}) that is not this member's; pass force to overwrite it")]
    ReplacementHoldsData { zone: u32, state: zns::ZoneState },
    #[error("not a ZapRAID array: {0}")]
    NotAnArray(String),
    #[error("array mismatch: {0}")]
    Mismatch(String),
    #[error("corrupt array: {0}")]
    Corrupt(String),
    /// More members failed than the parity covers (names them).
    #[error("array failed: {0}")]
    Failed(String),
    #[error("invalid options: {0}")]
    Options(String),
}

/// Client data blocks admitted into the write path at once, by default: the memory the
/// stripes in flight hold is bounded by this many blocks of data plus their parity (`1/k`
/// more) and one open stripe of padding.
pub const MAX_BLOCKS_IN_FLIGHT: u64 = 4096;

/// Counters of what the volume wrote since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZapRaidStats {
    /// Data blocks and trim records written for clients.
    pub client_blocks: u64,
    /// Blocks rewritten by garbage collection.
    pub relocated_blocks: u64,
    /// Relocated copies whose index update lost the compare-and-swap: a client write or trim
    /// of the LBA completed while the copy was in flight, and the client's version stays.
    pub relocations_superseded: u64,
    /// Padding blocks of stripes sealed before they were full.
    pub padding_blocks: u64,
    /// Collections begun and finished (they differ while one runs).
    pub collections_started: u64,
    pub segments_collected: u64,
    /// The most client data blocks admitted at once.
    pub blocks_in_flight_max: u64,
}

impl ZapRaidStats {
    /// Data-region blocks written per client block, parity excluded (it adds a constant
    /// `(k + m) / k`): `(client + relocated + padding) / client`.
    pub fn write_amplification(&self) -> f64 {
        if self.client_blocks == 0 {
            return 1.0;
        }
        (self.client_blocks + self.relocated_blocks + self.padding_blocks) as f64
            / self.client_blocks as f64
    }
}

/// Memory of the in-memory index, in bytes (docs/DESIGN.md, "Index").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexMemory {
    /// 16 bytes per logical block.
    pub l2p_bytes: u64,
    /// The compact stripe tables of the segments in use now.
    pub stripe_table_bytes: u64,
    /// Their bound, every segment in use: `(k + m) S Z ceil(log2 G)` bits, the paper's
    /// formula (`index::stripe_table_bits`), rounded up to 64-bit words per segment.
    pub stripe_table_bytes_max: u64,
    /// Places of trim records (32 bytes per record on the members, live or not yet collected).
    pub trim_place_bytes: u64,
}

/// State shared by the volume and its stripe tasks.
pub(crate) struct Shared {
    pub(crate) layout: Layout,
    /// The member devices, in array order; a replacement takes a failed member's place
    /// (`rebuild.rs`). Taken only to clone a device out, never held across an await.
    devs: parking_lot::RwLock<Vec<Arc<dyn ZonedDevice>>>,
    pub(crate) uuid: [u8; 16],
    pub(crate) volume_blocks: u64,
    /// How long a stripe with fewer than k blocks waits for more before it is padded.
    pub(crate) pad_after: Duration,
    pub(crate) st: Mutex<write::State>,
    /// `Some(cause)` once the volume has failed.
    pub(crate) failed: signal::Signal<Option<String>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// One garbage collection at a time.
    pub(crate) gc_lock: tokio::sync::Mutex<()>,
    /// Client reads hold it shared across their member reads; a collection holds it
    /// exclusive while it resets and frees its victim, so no read of an address looked up
    /// before the move reaches the reset zone.
    pub(crate) io_gate: tokio::sync::RwLock<()>,
    gc_policy: Mutex<GcPolicy>,
    /// The array-state generation known durable on every survivor; held while one is
    /// written (`members::record_state`).
    pub(crate) state_lock: tokio::sync::Mutex<u64>,
    /// The failed members (bit `i` = member `i`), for tasks waiting on a member's progress.
    pub(crate) member_events: signal::Signal<u64>,
    /// Client writes, trims and flushes hold it shared; a recovery's last step holds it
    /// exclusive while it catches the replacement up with the open segment.
    pub(crate) write_gate: tokio::sync::RwLock<()>,
    /// The recovery onto a replacement running or finished last, if any.
    pub(crate) recovery: Mutex<Option<RecoveryProgress>>,
    /// Admission of client data blocks (`MAX_BLOCKS_IN_FLIGHT`), with its size.
    admission: Mutex<(Arc<tokio::sync::Semaphore>, u64)>,
}

impl Shared {
    /// Member `i`'s device.
    pub(crate) fn member(&self, i: usize) -> Option<Arc<dyn ZonedDevice>> {
        self.devs.read().get(i).cloned()
    }

    /// Every member's device, in array order.
    pub(crate) fn member_devs(&self) -> Vec<Arc<dyn ZonedDevice>> {
        self.devs.read().clone()
    }

    /// Puts `dev` in member `i`'s place (a replacement of a failed member).
    pub(crate) fn set_member(&self, i: usize, dev: Arc<dyn ZonedDevice>) {
        if let Some(slot) = self.devs.write().get_mut(i) {
            *slot = dev;
        }
    }

    pub(crate) fn gc_policy(&self) -> GcPolicy {
        *self.gc_policy.lock()
    }

    /// Waits until `blocks` more data blocks (at most the whole limit) may enter the write
    /// path; the permit is held until the command completes.
    pub(crate) async fn admit(
        &self,
        blocks: u64,
    ) -> BlockResult<tokio::sync::OwnedSemaphorePermit> {
        let (sem, limit) = self.admission.lock().clone();
        let want = blocks.clamp(1, limit);
        let p = sem
            .clone()
            .acquire_many_owned(want as u32)
            .await
            .map_err(|_| BlockError::Failed("admission closed".into()))?;
        let now = limit - sem.available_permits() as u64;
        let mut st = self.st.lock();
        st.stats.blocks_in_flight_max = st.stats.blocks_in_flight_max.max(now);
        Ok(p)
    }

    pub(crate) fn check_failed(&self) -> BlockResult<()> {
        match self.failed.get() {
            Some(why) => Err(BlockError::Failed(why)),
            None => Ok(()),
        }
    }

    /// Fails the volume with `why` (the first cause wins).
    pub(crate) fn fail(&self, why: String) {
        self.failed.modify_if(|f| {
            if f.is_none() {
                tracing::error!("zapraid volume failed: {why}");
                *f = Some(why);
                true
            } else {
                false
            }
        });
    }

    /// Runs `fut` as a task of the volume. A task that panics (a broken invariant, in the
    /// volume or a member's driver) fails the volume with the panic's message, so the commands
    /// waiting for what it would have done end with that cause instead of waiting for ever.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        fut: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let sh = Arc::downgrade(self);
        let guarded = async move {
            if let Err(why) = zns::panic::caught(fut).await {
                if let Some(sh) = sh.upgrade() {
                    sh.fail(format!("a volume task panicked: {why}"));
                }
            }
        };
        let mut tasks = self.tasks.lock();
        tasks.retain(|t| !t.is_finished());
        tasks.push(tokio::spawn(guarded));
    }

    fn abort_tasks(&self) {
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
    }

    pub(crate) fn check_range(&self, lba: Lba, bytes: usize) -> BlockResult<u64> {
        let bs = self.layout.block_size();
        if !bytes.is_multiple_of(bs) {
            return Err(BlockError::Misaligned);
        }
        let blocks = (bytes / bs) as u64;
        match lba.checked_add(blocks) {
            Some(end) if end <= self.volume_blocks => Ok(blocks),
            _ => Err(BlockError::OutOfRange),
        }
    }

    /// Flushes every surviving member concurrently; a member whose flush fails is failed
    /// (the caller records the new state: `members::record_state`). Errs only when the
    /// volume failed.
    pub(crate) async fn flush_members(&self) -> BlockResult<()> {
        let devs = self.member_devs();
        let flushes = devs.iter().enumerate().map(|(i, m)| async move {
            if members::is_failed(self, i) {
                return Ok(());
            }
            m.flush().await.map_err(|s| (i, s))
        });
        for r in futures::future::join_all(flushes).await {
            if let Err((i, s)) = r {
                members::member_failed(self, i, &format!("flush: {s}"));
            }
        }
        self.check_failed()
    }
}

/// A ZapRAID block volume over `k + m` zoned members.
pub struct ZapRaidVolume {
    sh: Arc<Shared>,
}

/// The array state a volume starts with.
pub(crate) struct StartState {
    /// The array-state generation and the failed members.
    pub(crate) gen: u64,
    pub(crate) failed: Vec<bool>,
    /// The newest generation already durable on the members: `record_state` writes any
    /// newer one. Below `gen` when open found a member absent that the recorded state did
    /// not name; taking `gen` for recorded would leave the failure in memory only, and an
    /// array with nothing more written would take the stale member back at the next open.
    pub(crate) recorded_gen: u64,
}

impl ZapRaidVolume {
    fn assemble(
        layout: Layout,
        members: Vec<Arc<dyn ZonedDevice>>,
        uuid: [u8; 16],
        volume_blocks: u64,
        index: Index,
        next_seq: u64,
        state: StartState,
    ) -> ZapRaidVolume {
        let failed = signal::Signal::new(None);
        let mut st = write::State::new(index, next_seq);
        st.state_gen = state.gen;
        st.failed_members = state.failed;
        let bits = members::failed_bits(&st);
        ZapRaidVolume {
            sh: Arc::new(Shared {
                layout,
                devs: parking_lot::RwLock::new(members),
                uuid,
                volume_blocks,
                pad_after: Duration::from_millis(1),
                st: Mutex::new(st),
                failed,
                tasks: Mutex::new(Vec::new()),
                gc_lock: tokio::sync::Mutex::new(()),
                io_gate: tokio::sync::RwLock::new(()),
                gc_policy: Mutex::new(GcPolicy::Greedy),
                state_lock: tokio::sync::Mutex::new(state.recorded_gen),
                member_events: signal::Signal::new(bits),
                write_gate: tokio::sync::RwLock::new(()),
                recovery: Mutex::new(None),
                admission: Mutex::new((
                    Arc::new(tokio::sync::Semaphore::new(MAX_BLOCKS_IN_FLIGHT as usize)),
                    MAX_BLOCKS_IN_FLIGHT,
                )),
            }),
        }
    }

    /// Formats `members` as a new array and opens it. Members holding data are refused
    /// unless `opts.force`.
    pub async fn format(
        members: Vec<Arc<dyn ZonedDevice>>,
        opts: &FormatOptions,
    ) -> Result<ZapRaidVolume, ZapRaidError> {
        recover::format(members, opts).await
    }

    /// Opens an array, recovering its index from headers, footers and per-block metadata.
    pub async fn open(members: Vec<Arc<dyn ZonedDevice>>) -> Result<ZapRaidVolume, ZapRaidError> {
        recover::open(members).await
    }

    /// Opens an array some of whose members are gone (`None`: the image lost, the drive
    /// pulled): each stands in as a member that answers no command, so the open records it
    /// failed and the volume runs degraded, as after a failure at run time; a replacement
    /// (`replace_member`) rebuilds it. More members missing (or failed) than parity blocks
    /// refuse the open, naming them; every member missing is refused.
    pub async fn open_with_missing(
        members: Vec<Option<Arc<dyn ZonedDevice>>>,
    ) -> Result<ZapRaidVolume, ZapRaidError> {
        let Some(geo) = members.iter().flatten().next().map(|d| d.geometry()) else {
            return Err(ZapRaidError::Options(
                "every member is missing: give the images of the members present".into(),
            ));
        };
        let devs = members
            .into_iter()
            .map(|d| d.unwrap_or_else(|| Arc::new(zns::Absent { geo })))
            .collect();
        recover::open(devs).await
    }

    pub fn layout(&self) -> Layout {
        self.sh.layout
    }

    /// The index's memory now and the stripe tables' bound.
    pub fn index_memory(&self) -> IndexMemory {
        let l = self.sh.layout;
        let per_segment =
            crate::index::stripe_table_bits(l.k, l.m, l.stripes, 1, l.group).div_ceil(64) * 8;
        let st = self.sh.st.lock();
        IndexMemory {
            l2p_bytes: st.index.l2p_bytes(),
            stripe_table_bytes: st.index.stripe_table_bytes(),
            stripe_table_bytes_max: u64::try_from(per_segment * u128::from(l.segments()))
                .unwrap_or(u64::MAX),
            trim_place_bytes: st.index.trim_place_bytes(),
        }
    }

    /// Where `lba`'s current version lives, or `None` when it is unmapped or trimmed (or out
    /// of range). A block of a failed member is addressed offset = stripe.
    pub fn address_of(&self, lba: Lba) -> Option<crate::layout::Pba> {
        match self.sh.st.lock().index.lookup(lba) {
            Ok(crate::index::Mapping::Mapped { pba, .. }) => Some(pba),
            _ => None,
        }
    }

    /// Bytes of memory the compact stripe tables use now.
    pub fn stripe_table_bytes(&self) -> u64 {
        self.sh.st.lock().index.stripe_table_bytes()
    }

    /// What the volume wrote since it was opened (write amplification, collections).
    pub fn stats(&self) -> ZapRaidStats {
        self.sh.st.lock().stats
    }

    /// How garbage collection picks victims (greedy by default).
    pub fn set_gc_policy(&self, policy: GcPolicy) {
        *self.sh.gc_policy.lock() = policy;
    }

    /// Limits the client data blocks in the write path at once (at least 1; default
    /// `MAX_BLOCKS_IN_FLIGHT`). Commands admitted under the old limit finish under it.
    pub fn set_blocks_in_flight_limit(&self, blocks: u64) {
        let blocks = blocks.clamp(1, u64::from(u32::MAX));
        *self.sh.admission.lock() = (
            Arc::new(tokio::sync::Semaphore::new(blocks as usize)),
            blocks,
        );
    }

    /// Collects one sealed segment now, if one can be gained; returns whether it did.
    pub async fn collect(&self) -> BlockResult<bool> {
        let _one = self.sh.gc_lock.lock().await;
        gc::collect_one(&self.sh).await
    }

    /// Checks the index's invariants (tests).
    pub fn verify(&self) -> Result<(), String> {
        self.sh.st.lock().index.verify()
    }

    /// Marks a member failed: reads of its blocks are reconstructed from the others and
    /// new stripes omit it. The failure is recorded on every survivor by the next write that
    /// omits it or the next flush (`fail_member_durably` records it at once). A failure
    /// beyond `m` fails the volume.
    pub fn fail_member(&self, member: usize) {
        members::member_failed(&self.sh, member, "failed by request");
    }

    /// Marks a member failed and records it on every survivor before returning.
    pub async fn fail_member_durably(&self, member: usize) -> BlockResult<()> {
        members::member_failed(&self.sh, member, "failed by request");
        members::record_state(&self.sh).await
    }

    /// The members marked failed (a failed member stays failed across restarts until it is
    /// replaced).
    pub fn failed_members(&self) -> Vec<usize> {
        let st = self.sh.st.lock();
        (0..st.failed_members.len())
            .filter(|i| st.failed_members.get(*i).copied().unwrap_or(false))
            .collect()
    }

    /// The array state's generation: +1 for every change of the failed members.
    pub fn state_generation(&self) -> u64 {
        self.sh.st.lock().state_gen
    }

    /// Why the volume failed, if it did (names every member whose failure caused it).
    pub fn failure(&self) -> Option<String> {
        self.sh.failed.get()
    }

    /// Rebuilds failed member `member` onto `device`, online: client I/O goes on meanwhile
    /// (docs/DESIGN.md, "Recovery onto a replacement"). `device` must be empty or hold this
    /// array's member at that position (a recovery cut short), unless `force`; it has the
    /// members' geometry. Returns once the member is healthy again and that is recorded on
    /// every member. A failure of another member meanwhile fails the volume, naming both.
    pub async fn replace_member(
        &self,
        member: usize,
        device: Arc<dyn ZonedDevice>,
        force: bool,
    ) -> Result<(), ZapRaidError> {
        rebuild::replace_member(&self.sh, member, device, force).await
    }

    /// How far the running (or last finished) recovery onto a replacement has come.
    pub fn recovery_progress(&self) -> Option<RecoveryProgress> {
        *self.sh.recovery.lock()
    }

    /// The host goes away (tests of power loss): every stripe task stops where it is and
    /// nothing more reaches the members.
    pub fn crash(&self) {
        self.sh.fail("the host crashed".into());
        self.sh.abort_tasks();
    }

    /// Flushes and stops (clean shutdown).
    pub async fn close(self) -> BlockResult<()> {
        self.flush().await
    }
}

impl Drop for ZapRaidVolume {
    fn drop(&mut self) {
        // Stripe tasks hold the shared state; without the volume nobody waits for them.
        self.sh.abort_tasks();
    }
}

#[async_trait]
impl BlockDevice for ZapRaidVolume {
    fn block_size(&self) -> u32 {
        self.sh.layout.member.block_size
    }

    fn size_blocks(&self) -> u64 {
        self.sh.volume_blocks
    }

    async fn read(&self, lba: Lba, buf: &mut [u8]) -> BlockResult<()> {
        read::read(&self.sh, lba, buf).await
    }

    async fn write(&self, lba: Lba, data: &[u8], fua: bool) -> BlockResult<()> {
        let _gate = self.sh.write_gate.read().await;
        write::write(&self.sh, lba, data, fua).await
    }

    async fn flush(&self) -> BlockResult<()> {
        let _gate = self.sh.write_gate.read().await;
        write::flush(&self.sh).await
    }

    async fn trim(&self, lba: Lba, blocks: u64) -> BlockResult<()> {
        let _gate = self.sh.write_gate.read().await;
        write::trim(&self.sh, lba, blocks, false).await
    }

    async fn write_zeroes(&self, lba: Lba, blocks: u64, fua: bool) -> BlockResult<()> {
        let _gate = self.sh.write_gate.read().await;
        write::trim(&self.sh, lba, blocks, fua).await
    }
}
