//! The wall clock, behind a trait so the portable harness never names
//! `std::time::Instant` (which panics on wasm32-unknown-unknown). Natively
//! [`MonotonicClock`] uses `Instant`; a browser build implements [`Clock`] with
//! `performance.now()`.

/// A monotonic clock in milliseconds.
pub trait Clock {
    /// Milliseconds since an arbitrary, fixed origin. Never goes backwards.
    fn now_ms(&self) -> f64;
}

/// `std::time::Instant`-based clock (native only).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: std::time::Instant,
}

#[cfg(not(target_arch = "wasm32"))]
impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: std::time::Instant::now(),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl Clock for MonotonicClock {
    fn now_ms(&self) -> f64 {
        self.origin.elapsed().as_secs_f64() * 1e3
    }
}
