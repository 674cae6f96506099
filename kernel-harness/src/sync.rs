//! A tiny one-shot channel: a wgpu callback (buffer mapped, work done) sends, an async
//! function awaits. It has no executor dependency, so the same code runs under
//! `pollster` natively and under the browser's event loop on wasm32.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_gone: bool,
}

/// Sending half: consumed by [`Sender::send`].
pub struct Sender<T>(Arc<Mutex<Slot<T>>>);

/// Receiving half: a future resolving to `Some(value)`, or `None` if the sender was
/// dropped without sending.
pub struct Receiver<T>(Arc<Mutex<Slot<T>>>);

/// Creates a connected sender/receiver pair.
pub fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        waker: None,
        sender_gone: false,
    }));
    (Sender(slot.clone()), Receiver(slot))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<T> Sender<T> {
    /// Delivers the value and wakes the receiver.
    pub fn send(self, value: T) {
        let waker = {
            let mut slot = lock(&self.0);
            slot.value = Some(value);
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut slot = lock(&self.0);
            slot.sender_gone = true;
            slot.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock(&self.0);
        if let Some(v) = slot.value.take() {
            return Poll::Ready(Some(v));
        }
        if slot.sender_gone {
            return Poll::Ready(None);
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivers_and_detects_drop() {
        let (tx, rx) = oneshot();
        tx.send(5);
        assert_eq!(pollster::block_on(rx), Some(5));
        let (tx, rx) = oneshot::<u8>();
        drop(tx);
        assert_eq!(pollster::block_on(rx), None);
        let (tx, rx) = oneshot();
        let t = std::thread::spawn(move || tx.send("late"));
        assert_eq!(pollster::block_on(rx), Some("late"));
        t.join().unwrap();
    }
}
