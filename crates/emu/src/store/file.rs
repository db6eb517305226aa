//! `FileStore`: an emulated device's bytes in an image file (superblock, zone table,
//! metadata region, data region, as docs/FORMAT.md lays them out), through pread/pwrite.
//!
//! Fault model: every host call can fail (a full host file system, a failing host disk).
//! This file only reports such errors, with the operation that failed; the device decides
//! what they mean for its zones (see `device::core`). Creating an image removes the file
//! again if creation fails after this code created it, so a retry is not refused; a file
//! that existed before (`--force`) is never removed, and the error says what is left of it.
//! An image opened read-only is opened O_RDONLY with a shared lock, and every write to it
//! is refused here too, behind the device's own refusal.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::Store;
use crate::image::{self, Layout, Superblock, ZoneEntry};
use crate::EmuError;

/// What an open reads from an image's tables: every zone's entry and, in a ZNS+ image, the
/// valid bitmap of each zone whose entry says TL-opened.
pub struct ImageZones {
    pub entries: Vec<ZoneEntry>,
    pub tl: Vec<Option<zns::ValidBitmap>>,
}

/// Linux's ENOSPC (the same number on the BSDs and macOS).
const ENOSPC: i32 = 28;

/// One line naming a host I/O error, in words a user can act on.
pub fn describe_io_error(e: &io::Error) -> String {
    if e.raw_os_error() == Some(ENOSPC) || e.kind() == io::ErrorKind::StorageFull {
        "no space left on the host file system".to_string()
    } else {
        e.to_string()
    }
}

/// The hook every host write passes: the failpoint when compiled in, nothing otherwise.
#[cfg(feature = "failpoints")]
fn host_write_hook() -> io::Result<()> {
    crate::failpoint::host_write()
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
fn host_write_hook() -> io::Result<()> {
    Ok(())
}

/// Takes the image's advisory lock so two processes never drive one image at once: an
/// exclusive lock to write, a shared one to read (readers may share an image, not a writer).
fn lock(file: &File, path: &Path, shared: bool) -> io::Result<()> {
    let r = if shared {
        file.try_lock_shared()
    } else {
        file.try_lock()
    };
    match r {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("{} is in use by another process", path.display()),
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// An image file: superblock, zone table, metadata region, data region.
pub struct FileStore {
    file: File,
    layout: Layout,
    /// Behind a lock: `set_clean` changes it through a shared store.
    superblock: parking_lot::Mutex<Superblock>,
    /// Whether `sync` calls fdatasync (host-crash durability, slow) or only orders writes.
    host_sync: bool,
    /// Opened O_RDONLY: every write is refused.
    read_only: bool,
}

impl FileStore {
    /// Creates a new image at `path`. An existing file is refused unless `force`. If creation
    /// fails after this call created the file, the file is removed; an existing file
    /// (`force`) is never removed, and the error says whether it was changed.
    pub fn create(
        path: &Path,
        sb: Superblock,
        host_sync: bool,
        force: bool,
    ) -> Result<FileStore, EmuError> {
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true).write(true);
        let (file, created) = match opts.clone().create_new(true).open(path) {
            Ok(f) => (f, true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && force => {
                (opts.open(path)?, false)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(EmuError::Exists(path.display().to_string()))
            }
            Err(e) => return Err(e.into()),
        };
        let mut touched = false;
        match Self::format(file, path, sb, host_sync, &mut touched) {
            Ok(store) => Ok(store),
            Err(e) => Err(undo_create(path, created, touched, e)),
        }
    }

    /// Lays a new image out in `file`; sets `touched` once the file's old content is gone.
    fn format(
        file: File,
        path: &Path,
        sb: Superblock,
        host_sync: bool,
        touched: &mut bool,
    ) -> io::Result<FileStore> {
        lock(&file, path, false)?;
        *touched = true;
        host_write_hook()?;
        file.set_len(0)?;
        let layout = Layout::for_image(&sb.geometry, sb.zns_plus);
        host_write_hook()?;
        file.set_len(layout.total_bytes)?;
        let store = FileStore {
            file,
            layout,
            superblock: parking_lot::Mutex::new(sb),
            host_sync,
            read_only: false,
        };
        let g = sb.geometry;
        let mut table = Vec::with_capacity(g.zone_count as usize * image::ZONE_ENTRY_BYTES);
        for (i, z) in crate::zones::ZoneTable::new(g).zones().iter().enumerate() {
            table.extend_from_slice(&image::encode_zone(i as u32, z));
        }
        store.write_at(&table, layout.table_offset, true)?;
        store.write_superblock()?;
        host_write_hook()?;
        store.file.sync_all()?;
        Ok(store)
    }

    /// Opens an existing image for reading and writing (exclusive lock) and reads its zone
    /// table.
    pub fn open(path: &Path, host_sync: bool) -> Result<(FileStore, ImageZones), EmuError> {
        Self::open_mode(path, host_sync, false)
    }

    /// Opens an existing image O_RDONLY (shared lock): for a read-only file or mount, or a
    /// command that only reads. Every write is refused.
    pub fn open_read_only(path: &Path) -> Result<(FileStore, ImageZones), EmuError> {
        Self::open_mode(path, false, true)
    }

    fn open_mode(
        path: &Path,
        host_sync: bool,
        read_only: bool,
    ) -> Result<(FileStore, ImageZones), EmuError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(!read_only)
            .open(path)?;
        lock(&file, path, read_only)?;
        let mut sb_bytes = vec![0u8; image::SUPERBLOCK_BYTES as usize];
        let len = file.metadata()?.len();
        if len < image::SUPERBLOCK_BYTES {
            return Err(image::ImageError::Truncated(format!("file is {len} bytes")).into());
        }
        file.read_exact_at(&mut sb_bytes, 0)?;
        let sb = image::decode_superblock(&sb_bytes)?;
        let g = sb.geometry;
        let layout = Layout::for_image(&g, sb.zns_plus);
        if len < layout.total_bytes {
            return Err(image::ImageError::Truncated(format!(
                "file is {len} bytes, the geometry needs {}",
                layout.total_bytes
            ))
            .into());
        }
        let mut table = vec![0u8; g.zone_count as usize * image::ZONE_ENTRY_BYTES];
        file.read_exact_at(&mut table, layout.table_offset)?;
        let zones = table
            .chunks_exact(image::ZONE_ENTRY_BYTES)
            .enumerate()
            .map(|(i, b)| image::decode_zone_entry(&g, i as u32, b))
            .collect::<Result<Vec<_>, _>>()?;
        let tl = read_valid_bitmaps(&file, &layout, &g, &zones)?;
        let store = FileStore {
            file,
            layout,
            superblock: parking_lot::Mutex::new(sb),
            host_sync,
            read_only,
        };
        Ok((store, ImageZones { entries: zones, tl }))
    }

    pub fn superblock(&self) -> Superblock {
        *self.superblock.lock()
    }

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn write_superblock(&self) -> io::Result<()> {
        let sb = *self.superblock.lock();
        self.write_at(&image::encode_superblock(&sb), 0, false)
    }

    /// Every write to the image goes through here: refused when read-only, and subject to
    /// the failpoint. A failing write of block data or metadata (`tearable`) lets a prefix
    /// through first, as a real short write before ENOSPC does; a zone table entry or the
    /// superblock lies within one host page, which the page cache takes whole or not at all.
    fn write_at(&self, buf: &[u8], at: u64, tearable: bool) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the image is open read-only",
            ));
        }
        if let Err(e) = host_write_hook() {
            if tearable {
                self.file.write_all_at(&buf[..buf.len() / 2], at)?;
            }
            return Err(e);
        }
        self.file.write_all_at(buf, at)
    }
}

/// Reads the valid bitmap of every zone whose entry says TL-opened. Such an entry in an image
/// without the valid-bitmap region (no ZNS+ flag) means a corrupt image.
fn read_valid_bitmaps(
    file: &File,
    layout: &Layout,
    g: &zns::Geometry,
    entries: &[ZoneEntry],
) -> Result<Vec<Option<zns::ValidBitmap>>, EmuError> {
    let mut maps = Vec::with_capacity(entries.len());
    let mut slot = vec![0u8; layout.tl_slot_bytes as usize];
    for (i, e) in entries.iter().enumerate() {
        let index = i as u32;
        if e.zone.attributes & zns::zone_attr::TLO == 0 {
            maps.push(None);
            continue;
        }
        let Some(at) = layout.tl_slot_offset(index) else {
            return Err(image::ImageError::ZoneEntry(
                index,
                "TL-opened in an image without ZNS+".into(),
            )
            .into());
        };
        file.read_exact_at(&mut slot, at)?;
        let data_blocks = e.zone.data_end - g.zone_start(index);
        maps.push(Some(image::decode_tl_slot(g, index, &slot, data_blocks)?));
    }
    Ok(maps)
}

/// Cleans up after a failed create and says what is left at `path`.
fn undo_create(path: &Path, created: bool, touched: bool, e: io::Error) -> EmuError {
    let cause = describe_io_error(&e);
    let p = path.display();
    let text = match (created, touched) {
        (true, _) => match std::fs::remove_file(path) {
            Ok(()) => format!("{cause} (the partly created {p} was removed)"),
            Err(r) => format!(
                "{cause}; removing the partly created {p} failed too ({r}): remove it by hand"
            ),
        },
        (false, true) => format!(
            "{cause}; the existing {p} was overwritten in part and is no longer a valid image: \
             fix the cause and create it again with --force, or remove it"
        ),
        (false, false) => format!("{cause} (the existing {p} was not changed)"),
    };
    EmuError::Create(text)
}

impl Store for FileStore {
    fn read_data(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file
            .read_exact_at(buf, self.layout.data_offset + offset)
    }
    fn write_data(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_at(data, self.layout.data_offset + offset, true)
    }
    fn read_meta(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file
            .read_exact_at(buf, self.layout.meta_offset + offset)
    }
    fn write_meta(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_at(data, self.layout.meta_offset + offset, true)
    }
    fn discard(&self, _data: (u64, u64), _meta: (u64, u64)) -> io::Result<()> {
        // Stale bytes above the write pointer are never read back, so nothing needs erasing.
        Ok(())
    }
    fn persist_zone(&self, index: u32, entry: &ZoneEntry) -> io::Result<()> {
        let at = self.layout.table_offset + u64::from(index) * image::ZONE_ENTRY_BYTES as u64;
        self.write_at(&image::encode_zone_entry(index, entry), at, false)
    }
    fn persist_valid_bitmap(&self, index: u32, bits: &[u8]) -> io::Result<()> {
        let Some(at) = self.layout.tl_slot_offset(index) else {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the image has no valid-bitmap region (it was created without ZNS+)",
            ));
        };
        let slot = image::encode_tl_slot(index, bits, self.layout.tl_slot_bytes);
        // Not tearable in the sense of `write_at`: a torn slot fails its checksum, and the
        // zone's entry refers to it only once it is written whole (see `Core::tl_open`).
        self.write_at(&slot, at, false)
    }
    fn set_clean(&self, clean: bool) -> io::Result<()> {
        self.superblock.lock().clean = clean;
        self.write_superblock()?;
        if clean {
            host_write_hook()?;
            self.file.sync_all()?;
        }
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        if self.host_sync && !self.read_only {
            host_write_hook()?;
            self.file.sync_data()?;
        }
        Ok(())
    }
    fn footprint_bytes(&self) -> u64 {
        self.layout.total_bytes
    }
}
