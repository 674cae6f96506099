//! The client's one monotonic clock: milliseconds (f64) since the run began.

use std::time::Instant;

/// Milliseconds since an epoch, from `Instant` (never a wall clock).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub fn start() -> Self {
        Self {
            epoch: Instant::now(),
        }
    }

    /// Milliseconds since the epoch.
    #[inline]
    pub fn now_ms(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64() * 1000.0
    }

    /// The instant `ms` after the epoch.
    pub fn instant_of(&self, ms: f64) -> Instant {
        self.epoch + std::time::Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    }

    /// The tokio instant `ms` after the epoch (for schedules).
    pub fn instant_at(&self, ms: f64) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.instant_of(ms))
    }
}
