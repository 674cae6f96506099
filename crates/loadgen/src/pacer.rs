//! Sending on time. An open loop's latencies are measured from each request's
//! scheduled time, so a send that leaves late adds its lateness to every figure of
//! that request. tokio's timer has millisecond granularity (a `sleep_until` wakes up
//! to a millisecond and more after its deadline: sends left 1-3 ms late, p99 6 ms in
//! a trace replay); an operating system sleep (`nanosleep`) overshoots by tens of
//! microseconds. So the open loop's schedule runs on a thread of its own: it sleeps
//! until [`SPIN_MS`] before each hand-off, waits out the rest checking the clock, and
//! hands the request to the runtime [`HANDOFF_MS`] before its time (an idle runtime
//! takes a while to wake up); the request's task then waits out those last
//! microseconds itself ([`spin_until`]) and sends. The spins cost well under a
//! millisecond of a core per send (about 15% of a core at 200 req/s), not a core for
//! the whole run.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::clock::Clock;

/// How long before a send the pacer stops sleeping and watches the clock: more than
/// an OS sleep's usual overshoot.
pub const SPIN_MS: f64 = 0.3;

/// How long before a send its request is handed to the runtime: more than a parked
/// worker thread takes to wake up.
pub const HANDOFF_MS: f64 = 0.7;

/// Longest single sleep (so a stop is noticed within it).
const SLICE_MS: f64 = 50.0;

/// Blocks the calling thread until `t_ms` on `clock`, within microseconds; `false`
/// (at once, or within [`SLICE_MS`]) when `stop` is cancelled first. Call it from a
/// thread of its own, never from the runtime's.
pub fn wait_until(clock: &Clock, t_ms: f64, stop: &CancellationToken) -> bool {
    loop {
        if stop.is_cancelled() {
            return false;
        }
        let left = t_ms - clock.now_ms();
        if left <= SPIN_MS {
            break;
        }
        std::thread::sleep(Duration::from_secs_f64(
            (left - SPIN_MS).min(SLICE_MS) / 1e3,
        ));
    }
    while clock.now_ms() < t_ms {
        std::hint::spin_loop();
    }
    !stop.is_cancelled()
}

/// Waits out the last stretch before `t_ms` on the calling thread (at most about
/// [`HANDOFF_MS`] when called on time; returns at once when `t_ms` has passed).
pub fn spin_until(clock: &Clock, t_ms: f64) {
    while clock.now_ms() < t_ms {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_on_time_and_stops_when_told() {
        let clock = Clock::start();
        let stop = CancellationToken::new();
        let mut late = Vec::new();
        for k in 1..=40 {
            let t = 5.0 + f64::from(k) * 1.7;
            assert!(wait_until(&clock, t, &stop));
            late.push(clock.now_ms() - t);
        }
        // Never early; late only by the time it takes to read the clock (generous
        // bound: a loaded 2-core machine can preempt the thread).
        assert!(late.iter().all(|l| *l >= 0.0), "{late:?}");
        late.sort_by(f64::total_cmp);
        assert!(late[late.len() / 2] < 0.25, "{late:?}");
        // A stop ends a long wait promptly.
        let stopper = stop.clone();
        let t0 = clock.now_ms();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            stopper.cancel();
        });
        assert!(!wait_until(&clock, t0 + 10_000.0, &stop));
        assert!(clock.now_ms() - t0 < 5_000.0);
        h.join().unwrap();
    }
}
