//! In-flight budgets: how many requests and how many data bytes may be held at once, one
//! budget per connection and one for the whole server.
//!
//! A connection's budget bounds what one client can make the server hold (requests parsed,
//! write payloads received, replies not yet sent). The server's budget bounds the work on
//! the volume and the read buffers of all connections together, so that many clients, or
//! clients that queue work and vanish, cannot pile up more than a fixed amount of it. A
//! request holds its permits until its reply is sent or dropped.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A count of requests and a count of data bytes, each a FIFO semaphore, so waiters are
/// served in arrival order and a large request is not overtaken for ever by small ones.
pub(crate) struct Budget {
    requests: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
}

/// Most permits one request holds: the connection's request and bytes, the server's
/// request and bytes.
const HELD_INLINE: usize = 4;

/// Permits held by one request; released on drop. Kept inline, not in a `Vec`: a request
/// holds at most `HELD_INLINE`, and an allocation per request showed in the profile of 4 KiB
/// writes (docs/BENCHMARKS.md).
#[derive(Default)]
pub(crate) struct Held {
    inline: [Option<OwnedSemaphorePermit>; HELD_INLINE],
    /// Permits beyond `HELD_INLINE`, should a caller ever take more.
    more: Vec<OwnedSemaphorePermit>,
}

impl Held {
    pub fn add(&mut self, p: OwnedSemaphorePermit) {
        match self.inline.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(p),
            None => self.more.push(p),
        }
    }

    /// Permits held (for tests).
    #[cfg(test)]
    fn count(&self) -> usize {
        self.inline.iter().flatten().count() + self.more.len()
    }
}

/// The budget's semaphores are never closed while a request can wait on them.
#[derive(Debug)]
pub(crate) struct Closed;

impl Budget {
    pub fn new(requests: usize, bytes: usize) -> Budget {
        Budget {
            requests: Arc::new(Semaphore::new(requests)),
            bytes: Arc::new(Semaphore::new(bytes)),
        }
    }

    /// Waits for room for one more request.
    pub async fn request(&self) -> Result<OwnedSemaphorePermit, Closed> {
        self.requests
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Closed)
    }

    /// Waits for room for `n` more data bytes; `n` must not exceed the budget's total, which
    /// the configuration checks (every budget holds at least the largest request).
    pub async fn bytes(&self, n: u32) -> Result<OwnedSemaphorePermit, Closed> {
        self.bytes
            .clone()
            .acquire_many_owned(n)
            .await
            .map_err(|_| Closed)
    }

    /// Waits for room for one request carrying `n` data bytes.
    pub async fn request_with_bytes(&self, n: u32, held: &mut Held) -> Result<(), Closed> {
        held.add(self.request().await?);
        if n > 0 {
            held.add(self.bytes(n).await?);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every permit added is held until the `Held` is dropped, also beyond the inline
    /// slots, and all of them come back then.
    #[tokio::test]
    async fn held_permits_are_released_on_drop_however_many() {
        let budget = Budget::new(10, 1000);
        let mut held = Held::default();
        for _ in 0..HELD_INLINE + 2 {
            held.add(budget.request().await.expect("room"));
        }
        held.add(budget.bytes(600).await.expect("room"));
        assert_eq!(held.count(), HELD_INLINE + 3);
        assert_eq!(budget.requests.available_permits(), 10 - HELD_INLINE - 2);
        assert_eq!(budget.bytes.available_permits(), 400);
        drop(held);
        assert_eq!(budget.requests.available_permits(), 10);
        assert_eq!(budget.bytes.available_permits(), 1000);
    }
}
