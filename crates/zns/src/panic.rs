//! Panics in tasks that others wait on. A panic in a spawned task ends only that task, and
//! whoever waits for its result waits for ever; the layers that run such tasks catch the
//! panic at the task's edge and turn it into the volume's failure or a command's error, with
//! the panic's message as the cause.

use std::any::Any;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::task::Poll;

/// The message a panic carried (`panic!` with a literal or a formatted string).
pub fn message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message")
}

/// Runs `fut` to completion, or to its first panic, returned as the panic's message. The
/// future is not polled again after it panicked.
pub async fn caught<F: Future>(fut: F) -> Result<F::Output, String> {
    let mut fut = pin!(fut);
    std::future::poll_fn(
        move |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(message(&*panic).to_string())),
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_its_message_and_a_result_passes_through() {
        assert_eq!(caught(async { 7 }).await, Ok(7));
        let n = 3;
        let r: Result<(), String> = caught(async move { panic!("broken invariant {n}") }).await;
        assert_eq!(r, Err("broken invariant 3".to_string()));
        let r: Result<(), String> = caught(async { panic!("literal") }).await;
        assert_eq!(r, Err("literal".to_string()));
        // A panic after the future waited once.
        let r: Result<(), String> = caught(async {
            tokio::task::yield_now().await;
            std::panic::panic_any(5u32)
        })
        .await;
        assert_eq!(r, Err("a panic without a message".to_string()));
    }
}
