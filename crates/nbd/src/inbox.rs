//! A connection's receive buffer: request headers are parsed from it and write payloads are
//! handed on as views of it, so the bytes of a write are copied once in user space (by the
//! volume), not twice.
//!
//! The socket is read into the spare capacity of one chunk (`CHUNK` bytes, or one request
//! larger than that). A payload is split off the chunk as a `Bytes` (no copy, and no
//! allocation of its size). A chunk whose views are all dropped is reused; one still viewed
//! is left to its views and a fresh chunk takes its place, with the few unconsumed bytes
//! (part of the next request) copied over. On a volume that completes writes at once (the
//! in-memory ones) a view is dropped before the next request is read, so the chunk is
//! reused; a small write kept waiting keeps its whole chunk alive, which the bound below
//! limits.
//!
//! Memory bound: at most `MAX_SHARED` chunks may be kept alive by views at once; past that
//! a payload is copied into its own buffer. So a connection holds at most `MAX_SHARED + 1`
//! chunks besides its payload budget, whatever order its writes complete in.
//!
//! Fault model: a client may stop at any byte. End of file between requests is a clean
//! close; end of file inside a header or payload is `UnexpectedEof`; a socket error is
//! returned as it is. Bytes after a request stay buffered for the next one.

use std::io;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Size of a receive chunk. At queue depth 16 one read takes many small requests, and
/// several 128 KiB writes fit before the chunk is replaced.
pub(crate) const CHUNK: usize = 1 << 20;
/// Reads are made with at least this much room, so a read is never a few bytes long.
const MIN_READ: usize = 64 * 1024;
/// Smallest payload counted as large: the header after it is placed so that the next
/// payload (most likely as large) starts aligned (`ALIGN`), and read with it in one read.
pub(crate) const LARGE: usize = 64 * 1024;
/// Chunks that views may keep alive at once.
pub(crate) const MAX_SHARED: usize = 4;
/// A large payload that starts a read is placed at an address aligned to this. A volume's
/// blocks are at least this aligned in memory (the emulator's store chunks are page-aligned),
/// and a copy whose source and destination share their offset within a cache line runs about
/// a third faster than one whose offsets differ.
const ALIGN: usize = 64;

pub(crate) struct Inbox<R> {
    r: R,
    /// Bytes read and not consumed yet, then the chunk's spare capacity.
    buf: BytesMut,
    /// A token of each chunk that lent a view and may still be viewed; every view holds a
    /// clone, so a chunk is no longer viewed once its token here is the only one.
    shared: Vec<Arc<()>>,
    /// The current chunk's token, once it has lent a view (it is then in `shared` too).
    lent: Option<Arc<()>>,
    chunk: usize,
    /// The size of the last payload if it was large (0 if not): the next header is placed so
    /// that its payload (most likely as large) starts aligned, with room for that payload
    /// after it, and one read takes both.
    large: usize,
}

impl<R: AsyncRead + Unpin> Inbox<R> {
    pub fn new(r: R) -> Inbox<R> {
        Inbox::with_chunk(r, CHUNK)
    }

    /// An inbox with chunks of `chunk` bytes (tests use small ones).
    pub fn with_chunk(r: R, chunk: usize) -> Inbox<R> {
        Inbox {
            r,
            buf: BytesMut::new(),
            shared: Vec::new(),
            lent: None,
            chunk,
            large: 0,
        }
    }

    /// Bytes buffered and not consumed yet.
    #[cfg(test)]
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Chunks views keep alive now (the current one included once it lent a view).
    #[cfg(test)]
    pub fn shared_chunks(&mut self) -> usize {
        self.prune();
        self.shared.len()
    }

    /// Forgets the chunks no view holds any more (the current one's token is held twice by
    /// the inbox itself).
    fn prune(&mut self) {
        let current = self.lent.as_ref().map(Arc::as_ptr);
        self.shared.retain(|t| {
            let own = if Some(Arc::as_ptr(t)) == current {
                2
            } else {
                1
            };
            Arc::strong_count(t) > own
        });
        if let Some(c) = current {
            if !self.shared.iter().any(|t| Arc::as_ptr(t) == c) {
                self.lent = None;
            }
        }
    }

    /// Makes room for `need` more bytes after those buffered, contiguous with them.
    fn room(&mut self, need: usize) {
        if self.buf.capacity() - self.buf.len() >= need {
            return;
        }
        let len = self.buf.len();
        let want = need.max(self.chunk.saturating_sub(len));
        // A chunk nobody else views is taken back whole (the buffered bytes move to its
        // front); otherwise a fresh one is allocated and they are copied into it. Either way
        // the views lent so far keep their bytes: `try_reclaim` fails while any is alive.
        if !self.buf.try_reclaim(want) {
            let mut fresh = BytesMut::with_capacity(self.chunk.max(len + need));
            fresh.extend_from_slice(&self.buf);
            self.buf = fresh;
        }
        self.lent = None;
    }

    /// One read from the socket of at most `limit` bytes into the chunk; returns the bytes
    /// read (0 at end of file).
    async fn fill(&mut self, limit: usize) -> io::Result<usize> {
        self.room(limit.clamp(1, MIN_READ));
        let spare = self.buf.capacity() - self.buf.len();
        let mut rest = (&mut self.r).take(limit.min(spare) as u64);
        rest.read_buf(&mut self.buf).await
    }

    /// Reads a request header into `out`; `Ok(false)` when the client closed cleanly before
    /// its first byte.
    pub async fn header(&mut self, out: &mut [u8]) -> io::Result<bool> {
        while self.buf.len() < out.len() {
            // Nothing of the next request buffered: start it at a chunk's beginning if this
            // one is a quarter full or less, so that its payload most likely fits after it and
            // no bytes need moving later.
            let mut limit = usize::MAX;
            if self.buf.is_empty() {
                if self.buf.capacity() < self.chunk / 4 {
                    self.room(self.chunk);
                }
                if self.large > 0 {
                    // Room for the header and a payload as large as the last one, so that
                    // nothing read moves before the payload is handed on; the header placed
                    // so that the payload after it starts aligned; one read for both,
                    // stopping at the payload's expected end so that the request after it
                    // starts a read of its own and is aligned in turn.
                    let need = out.len() + self.large;
                    if self.buf.capacity() < pad_for(&self.buf, out.len()) + need {
                        self.room(ALIGN + need);
                    }
                    let pad = pad_for(&self.buf, out.len());
                    self.buf.put_bytes(0, pad);
                    self.buf.advance(pad);
                    limit = out.len() + self.large;
                }
            }
            if self.fill(limit).await? == 0 {
                if self.buf.is_empty() {
                    return Ok(false);
                }
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        out.copy_from_slice(&self.buf[..out.len()]);
        self.buf.advance(out.len());
        // Only the read right after a large payload is cut short: requests without a payload
        // (reads, flushes) after it are read many at once again.
        self.large = 0;
        Ok(true)
    }

    /// Reads exactly `n` payload bytes. Reads for the rest of a payload stop at its end, so
    /// a payload that spans reads leaves nothing behind to move when the chunk is replaced.
    pub async fn payload(&mut self, n: usize) -> io::Result<Bytes> {
        self.large = if n >= LARGE { n } else { 0 };
        if self.buf.len() < n {
            self.room(n - self.buf.len());
        }
        while self.buf.len() < n {
            if self.fill(n - self.buf.len()).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        let token = match &self.lent {
            Some(t) => t.clone(),
            None => {
                self.prune();
                if self.shared.len() >= MAX_SHARED {
                    // Too many chunks kept alive by views already: copy this one.
                    let data = Bytes::copy_from_slice(&self.buf[..n]);
                    self.buf.advance(n);
                    return Ok(data);
                }
                let t = Arc::new(());
                self.shared.push(t.clone());
                self.lent = Some(t.clone());
                t
            }
        };
        let data = self.buf.split_to(n).freeze();
        Ok(Bytes::from_owner(View {
            data,
            _chunk: token,
        }))
    }

    /// Skips `n` bytes (the payload of a refused write).
    pub async fn skip(&mut self, n: usize) -> io::Result<()> {
        let mut left = n;
        loop {
            let k = left.min(self.buf.len());
            self.buf.advance(k);
            left -= k;
            if left == 0 {
                return Ok(());
            }
            if self.fill(left).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

/// Bytes to skip at the end of `buf` so that what follows a header of `header` bytes there
/// starts aligned to `ALIGN`.
fn pad_for(buf: &BytesMut, header: usize) -> usize {
    let at = buf.as_ptr() as usize + buf.len() + header;
    (ALIGN - at % ALIGN) % ALIGN
}

/// A payload lent from a chunk, with its chunk's token.
struct View {
    data: Bytes,
    _chunk: Arc<()>,
}

impl AsRef<[u8]> for View {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncWriteExt, ReadBuf};

    use super::*;

    /// Bytes 0, 1, 2, ... (mod 251), so that a misplaced byte shows.
    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }

    /// A reader handing out at most `step` bytes per read, as a socket may, then failing
    /// with `fail` (or ending) once `data` is used up.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        fail: Option<io::Error>,
        reads: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if self.at == self.data.len() {
                return Poll::Ready(self.fail.take().map_or(Ok(()), Err));
            }
            self.reads += 1;
            let n = self
                .step
                .min(self.data.len() - self.at)
                .min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.data[at..at + n]);
            self.at += n;
            Poll::Ready(Ok(()))
        }
    }

    fn trickle(data: Vec<u8>, step: usize) -> Trickle {
        Trickle {
            data,
            at: 0,
            step,
            fail: None,
            reads: 0,
        }
    }

    #[tokio::test]
    async fn a_payload_split_across_reads_is_read_exactly_and_what_follows_stays_buffered() {
        let bytes = pattern(300);
        // A duplex pipe of 7 bytes: every read returns at most 7.
        let (mut tx, rx) = tokio::io::duplex(7);
        let sent = bytes.clone();
        let writer = tokio::spawn(async move { tx.write_all(&sent).await });
        let mut inbox = Inbox::with_chunk(rx, 64);
        let mut header = [0u8; 10];
        assert!(inbox.header(&mut header).await.expect("header"));
        assert_eq!(header[..], bytes[..10]);
        let data = inbox.payload(190).await.expect("payload");
        assert_eq!(data[..], bytes[10..200]);
        inbox.skip(50).await.expect("skip");
        let rest = inbox.payload(50).await.expect("what follows");
        assert_eq!(rest[..], bytes[250..]);
        assert!(!inbox.header(&mut header).await.expect("clean end"));
        writer.await.expect("writer").expect("write");
    }

    #[tokio::test]
    async fn a_client_that_ends_mid_header_mid_payload_or_mid_skip_is_an_unexpected_eof() {
        let mut header = [0u8; 28];
        let mut inbox = Inbox::new(trickle(pattern(27), 5));
        let e = inbox.header(&mut header).await.expect_err("short header");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);

        for n in [100, LARGE + 1] {
            let mut inbox = Inbox::new(trickle(pattern(28 + n - 1), 4096));
            assert!(inbox.header(&mut header).await.expect("header"));
            let e = inbox.payload(n).await.expect_err("short payload");
            assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof, "payload of {n}");
        }

        let mut inbox = Inbox::new(trickle(pattern(28 + 99), 10));
        assert!(inbox.header(&mut header).await.expect("header"));
        let e = inbox.skip(100).await.expect_err("short skip");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[tokio::test]
    async fn a_socket_error_mid_payload_is_returned_with_its_cause() {
        let mut src = trickle(pattern(28 + 500), 64);
        src.fail = Some(io::Error::new(io::ErrorKind::ConnectionReset, "peer reset"));
        let mut inbox = Inbox::new(src);
        let mut header = [0u8; 28];
        assert!(inbox.header(&mut header).await.expect("header"));
        let e = inbox.payload(LARGE).await.expect_err("reset");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(e.to_string(), "peer reset");
    }

    /// Small payloads used to be copied into a buffer of their own (an allocation and a
    /// copy per 4 KiB write); now every payload is a view of the chunk, and a small one does
    /// not keep a chunk from being reused once it is dropped.
    #[tokio::test]
    async fn payloads_large_and_small_are_views_of_the_chunk() {
        // Header, large payload, header, large payload, header, small payload.
        let big = LARGE;
        let bytes = pattern(3 * 28 + 2 * big + 100);
        let mut inbox = Inbox::with_chunk(trickle(bytes.clone(), usize::MAX), 8 * big);
        let mut header = [0u8; 28];
        let mut at = 0;
        let mut got = Vec::new();
        for n in [big, big, 100] {
            assert!(inbox.header(&mut header).await.expect("header"));
            assert_eq!(header[..], bytes[at..at + 28]);
            let data = inbox.payload(n).await.expect("payload");
            assert_eq!(data[..], bytes[at + 28..at + 28 + n]);
            at += 28 + n;
            got.push(data);
        }
        // Each payload sits in the same allocation as the one before, right after its own
        // header: none was copied out of the chunk.
        let first = got[0].as_ptr() as usize;
        assert_eq!(got[1].as_ptr() as usize, first + big + 28);
        assert_eq!(got[2].as_ptr() as usize, first + 2 * (big + 28));
        assert_eq!(inbox.shared_chunks(), 1);
        drop(got);
        assert_eq!(inbox.shared_chunks(), 0, "no view left");
    }

    /// Reads `n` requests of a `len`-byte payload each from `inbox` (the stream `bytes`) and
    /// keeps their payloads: at most `MAX_SHARED` chunks are alive at any time and exactly
    /// that many at the end, and every kept payload still holds its request's bytes.
    async fn keep_views(
        inbox: &mut Inbox<Trickle>,
        bytes: &[u8],
        n: usize,
        len: usize,
    ) -> Vec<Bytes> {
        let one = 28 + len;
        let mut header = [0u8; 28];
        let mut kept = Vec::new();
        for i in 0..n {
            assert!(inbox.header(&mut header).await.expect("header"));
            let data = inbox.payload(len).await.expect("payload");
            assert_eq!(data[..], bytes[i * one + 28..(i + 1) * one], "request {i}");
            kept.push(data);
            assert!(inbox.shared_chunks() <= MAX_SHARED);
        }
        assert_eq!(inbox.shared_chunks(), MAX_SHARED);
        for (i, data) in kept.iter().enumerate() {
            assert_eq!(
                data[..],
                bytes[i * one + 28..(i + 1) * one],
                "request {i} kept"
            );
        }
        kept
    }

    /// Small writes kept waiting keep their chunks alive; at most `MAX_SHARED` of them, after
    /// which payloads are copies, and the chunks are free again once the views are dropped.
    #[tokio::test]
    async fn small_views_keep_at_most_max_shared_chunks_alive() {
        let one = 28 + 100;
        let n = MAX_SHARED + 3;
        let bytes = pattern(2 * n * one);
        // A read returns one request, and a chunk has room for one read: each request
        // needs a chunk of its own while the earlier ones are viewed.
        let mut inbox = Inbox::with_chunk(trickle(bytes.clone(), one), MIN_READ);
        let mut header = [0u8; 28];
        let kept = keep_views(&mut inbox, &bytes, n, 100).await;
        drop(kept);
        assert_eq!(inbox.shared_chunks(), 0);
        // Dropped at once, as on an in-memory volume: one chunk serves every request.
        let mut first = None;
        for i in n..2 * n {
            assert!(inbox.header(&mut header).await.expect("header"));
            let data = inbox.payload(100).await.expect("payload");
            assert_eq!(data[..], bytes[i * one + 28..(i + 1) * one], "request {i}");
            let at = data.as_ptr() as usize;
            let base = *first.get_or_insert(at);
            assert!(
                at >= base && at < base + MIN_READ + one,
                "request {i} in one chunk"
            );
            drop(data);
            assert!(inbox.shared_chunks() <= 1);
        }
    }

    #[tokio::test]
    async fn a_chunk_no_longer_viewed_is_reused_and_a_viewed_one_is_left_to_its_views() {
        let big = LARGE;
        // A chunk holds three requests of `big`; seven arrive.
        let one = 28 + big;
        let bytes = pattern(7 * one);
        // Room for the padding that aligns the second and third payloads.
        let chunk = 3 * one + 2 * ALIGN;
        let mut inbox = Inbox::with_chunk(trickle(bytes.clone(), one), chunk);
        let mut header = [0u8; 28];
        let mut kept = Vec::new();
        for i in 0..3 {
            assert!(inbox.header(&mut header).await.expect("header"));
            let data = inbox.payload(big).await.expect("payload");
            assert_eq!(data[..], bytes[i * one + 28..(i + 1) * one]);
            kept.push(data);
        }
        let base = kept[0].as_ptr() as usize - 28;
        // Kept alive: the next request goes to a fresh chunk.
        assert!(inbox.header(&mut header).await.expect("header"));
        let data = inbox.payload(big).await.expect("payload");
        assert_eq!(data[..], bytes[3 * one + 28..4 * one]);
        let fresh = data.as_ptr() as usize;
        assert!(fresh < base || fresh >= base + chunk, "a fresh chunk");
        assert_eq!(kept[0][..], bytes[28..one], "the views keep their bytes");
        assert_eq!(inbox.shared_chunks(), 2);
        // Dropped: that chunk is free again, and the one after the fresh one is reused.
        drop(kept);
        drop(data);
        assert_eq!(inbox.shared_chunks(), 0);
        for i in 4..7 {
            assert!(inbox.header(&mut header).await.expect("header"));
            let data = inbox.payload(big).await.expect("payload");
            assert_eq!(data[..], bytes[i * one + 28..(i + 1) * one]);
            if i == 6 {
                // The second chunk was full and nothing views it: taken back from its start.
                assert_eq!(data.as_ptr() as usize, fresh);
            }
        }
    }

    #[tokio::test]
    async fn views_keep_at_most_max_shared_chunks_alive_and_later_payloads_are_copied() {
        let big = LARGE;
        let one = 28 + big;
        let n = MAX_SHARED + 3;
        let bytes = pattern(n * one);
        // One request per chunk, so that each view keeps a chunk of its own alive.
        let mut inbox = Inbox::with_chunk(trickle(bytes.clone(), one), one + ALIGN);
        // The views stay alive to the end.
        let _kept = keep_views(&mut inbox, &bytes, n, big).await;
        assert_eq!(inbox.buffered(), 0);
    }

    #[tokio::test]
    async fn a_large_payload_after_a_large_one_starts_aligned() {
        let big = LARGE + 100;
        let one = 28 + big;
        let bytes = pattern(4 * one);
        // A read returns at most a whole request: the first lands at the chunk's start, the
        // later ones wherever the inbox places their reads.
        let mut inbox = Inbox::with_chunk(trickle(bytes.clone(), one), 16 * one);
        let mut header = [0u8; 28];
        for i in 0..4 {
            assert!(inbox.header(&mut header).await.expect("header"));
            assert_eq!(header[..], bytes[i * one..i * one + 28]);
            let data = inbox.payload(big).await.expect("payload");
            assert_eq!(data[..], bytes[i * one + 28..(i + 1) * one], "request {i}");
            if i > 0 {
                let at = data.as_ptr() as usize;
                assert_eq!(at % ALIGN, 0, "request {i} at {at:x}");
            }
        }
    }

    /// Regression guard: the header after a large payload used to be read alone, so every
    /// request of a stream of large writes took two reads of the socket (header, payload)
    /// even when the socket held both. Now one read takes the header and the payload, which
    /// still starts aligned.
    #[tokio::test]
    async fn a_large_write_after_a_large_one_is_read_in_one_read() {
        let big = 2 * LARGE;
        let one = 28 + big;
        let bytes = pattern(6 * one);
        // The socket holds one request at a time, all of it.
        let mut inbox = Inbox::new(trickle(bytes.clone(), one));
        let mut header = [0u8; 28];
        for i in 0..6 {
            let before = inbox.r.reads;
            assert!(inbox.header(&mut header).await.expect("header"));
            assert_eq!(header[..], bytes[i * one..i * one + 28]);
            let data = inbox.payload(big).await.expect("payload");
            assert_eq!(data[..], bytes[i * one + 28..(i + 1) * one], "request {i}");
            if i > 0 {
                assert_eq!(inbox.r.reads - before, 1, "request {i}");
                assert_eq!(data.as_ptr() as usize % ALIGN, 0, "request {i}");
            }
        }
    }

    #[tokio::test]
    async fn headers_without_payload_after_a_large_write_are_read_many_at_once() {
        let big = LARGE;
        // A large write, then ten headers of requests without payload sent together.
        let bytes = pattern(28 + big + 10 * 28);
        let mut inbox = Inbox::new(trickle(bytes.clone(), 28 + big));
        let mut header = [0u8; 28];
        assert!(inbox.header(&mut header).await.expect("header"));
        let data = inbox.payload(big).await.expect("payload");
        assert_eq!(data[..], bytes[28..28 + big]);
        let before = inbox.r.reads;
        for i in 0..10 {
            assert!(inbox.header(&mut header).await.expect("header"));
            let at = 28 + big + i * 28;
            assert_eq!(header[..], bytes[at..at + 28], "header {i}");
        }
        // One read of the first header alone (it may be a large write's), one for the rest.
        assert!(
            inbox.r.reads - before <= 2,
            "{} reads",
            inbox.r.reads - before
        );
    }
}
