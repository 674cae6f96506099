//! The page's one clock, `performance.now()` (monotonic, ms as f64), timers, and a
//! cancellation signal.
//!
//! Every timestamp the metrics use comes from [`now`]; never `Date` (a wall clock
//! jumps, and a jump makes a negative TTFT).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

thread_local! {
    static PERFORMANCE: web_sys::Performance = web_sys::window()
        .and_then(|w| w.performance())
        .expect("the page needs performance.now()");
}

/// `performance.now()`: ms since the page's time origin.
pub fn now() -> f64 {
    PERFORMANCE.with(web_sys::Performance::now)
}

/// Resolves after about `ms` milliseconds (a browser timer: whole milliseconds,
/// and never early).
pub async fn sleep_ms(ms: f64) {
    let ms = if ms.is_finite() {
        ms.clamp(0.0, 2.0e9)
    } else {
        0.0
    };
    gloo_timers::future::TimeoutFuture::new(ms.round() as u32).await;
}

/// A run's stop signal: set once, observed by every request.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Rc<CancelInner>,
}

#[derive(Debug, Default)]
struct CancelInner {
    cancelled: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
}

impl CancelToken {
    /// A fresh token.
    pub fn new() -> Self {
        Self::default()
    }

    /// Signal every waiter.
    pub fn cancel(&self) {
        self.inner.cancelled.set(true);
        for w in self.inner.wakers.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.get()
    }

    /// Resolves once cancelled.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled {
            token: self.clone(),
        }
    }
}

/// The future of [`CancelToken::cancelled`].
#[derive(Debug)]
pub struct Cancelled {
    token: CancelToken,
}

impl Future for Cancelled {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.token.is_cancelled() {
            Poll::Ready(())
        } else {
            let mut wakers = self.token.inner.wakers.borrow_mut();
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            Poll::Pending
        }
    }
}
