//! Owned, block-aligned I/O buffers for O_DIRECT. The io_uring thread owns a buffer while its
//! command is in flight, so a caller that drops its future cannot free memory the kernel is
//! still writing into.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// Alignment of every buffer: a page, which satisfies every logical block size up to 4 KiB.
pub const ALIGN: usize = 4096;

/// A zeroed heap buffer aligned to [`ALIGN`].
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// The buffer is plain owned memory; moving it between threads is what it is for.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes, or None when the allocation fails.
    pub fn zeroed(len: usize) -> Option<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(1), ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })?;
        Some(AlignedBuf { ptr, len, layout })
    }

    /// A buffer holding a copy of `data`.
    pub fn copy_of(data: &[u8]) -> Option<AlignedBuf> {
        let mut b = AlignedBuf::zeroed(data.len())?;
        b.as_mut_slice().copy_from_slice(data);
        Some(b)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes, initialised (zeroed) and owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_copy() {
        let mut b = AlignedBuf::zeroed(8192).unwrap();
        assert_eq!(b.as_mut_ptr() as usize % ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        let c = AlignedBuf::copy_of(&[1, 2, 3]).unwrap();
        assert_eq!(c.as_slice(), &[1, 2, 3]);
        assert_eq!(AlignedBuf::zeroed(0).unwrap().len(), 0);
    }
}
