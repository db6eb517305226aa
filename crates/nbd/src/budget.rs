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

/// Permits held by one request; released on drop.
#[derive(Default)]
pub(crate) struct Held {
    permits: Vec<OwnedSemaphorePermit>,
}

impl Held {
    pub fn add(&mut self, p: OwnedSemaphorePermit) {
        self.permits.push(p);
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
