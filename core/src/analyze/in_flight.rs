//! The load a level really offered: the most requests the client had in flight
//! at once during its measured rounds (each request from its send to its end,
//! whatever its outcome), and their time-weighted mean (the requests' summed
//! time in flight over the rounds' windows: Little's law). A conversation
//! level's concurrency is conversations: each is counted from its first turn's
//! send to its last turn's end, its think time included.
//!
//! A closed-loop level whose client never had its concurrency in flight is
//! *under-loaded* (a round of 8 requests at concurrency 16 never has more than
//! 8 in flight): its figures are those of a lower load, and the sweep's
//! conclusions leave it out ([`super::sweep`]). The server's own count of
//! running requests is another figure: a server that batches fewer than the
//! client sends queues the rest, and the client's load is still what it claims.

use crate::model::{Load, ReachedLoad};
use tokenscope_measure::record::RequestRecord;

/// A level's requests' spans on the client's clock, round by round.
#[derive(Debug, Clone, Default)]
pub(crate) struct InFlightAcc {
    /// Per round: each request's send and end (outside conversations).
    requests: Vec<Vec<(f64, f64)>>,
    /// Per round: each conversation's first send and last end (a level has
    /// as many conversations as its concurrency: a short list, searched).
    sessions: Vec<Vec<(u64, (f64, f64))>>,
}

impl InFlightAcc {
    /// Add one measured request of round `round` (0-based).
    pub(crate) fn push(&mut self, round: usize, r: &RequestRecord) {
        let start = r.t_send_ms;
        let end = r.t_done_ms.unwrap_or(start).max(start);
        if self.requests.len() <= round {
            self.requests.resize_with(round + 1, Vec::new);
            self.sessions.resize_with(round + 1, Vec::new);
        }
        match r.session {
            Some(s) => {
                let sessions = &mut self.sessions[round];
                match sessions.iter_mut().find(|(id, _)| *id == s) {
                    Some((_, span)) => *span = (span.0.min(start), span.1.max(end)),
                    None => sessions.push((s, (start, end))),
                }
            }
            None => self.requests[round].push((start, end)),
        }
    }

    /// The load reached at `load` (`None` when nothing was measured).
    pub(crate) fn finish(&self, load: Load) -> Option<ReachedLoad> {
        let mut max = 0u32;
        let (mut busy_ms, mut window_ms) = (0.0, 0.0);
        let mut any = false;
        for (reqs, sessions) in self.requests.iter().zip(&self.sessions) {
            let spans: Vec<(f64, f64)> = reqs
                .iter()
                .chain(sessions.iter().map(|(_, s)| s))
                .copied()
                .collect();
            if spans.is_empty() {
                continue;
            }
            any = true;
            max = max.max(max_overlap(&spans));
            busy_ms += spans.iter().map(|(a, b)| b - a).sum::<f64>();
            let first = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
            let last = spans.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
            window_ms += last - first;
        }
        any.then(|| ReachedLoad {
            client_in_flight_max: max,
            client_in_flight_mean: if window_ms > 0.0 {
                busy_ms / window_ms
            } else {
                f64::from(max)
            },
            under_loaded: matches!(load, Load::Concurrency(c) if max < c),
        })
    }
}

/// The most spans open at once; a span ending when another starts does not
/// overlap it (a closed-loop worker's next send follows its last end).
pub fn max_overlap(spans: &[(f64, f64)]) -> u32 {
    // Starts and ends each sorted (the sort the percentiles use: one copy of
    // its code in the page), then walked together, an end at a start first.
    let mut starts: Vec<f64> = spans.iter().map(|s| s.0).collect();
    let mut ends: Vec<f64> = spans.iter().map(|s| s.1).collect();
    starts.sort_by(f64::total_cmp);
    ends.sort_by(f64::total_cmp);
    let (mut closed, mut max) = (0usize, 0usize);
    for (opened, start) in starts.iter().enumerate() {
        while closed < ends.len() && ends[closed] <= *start {
            closed += 1;
        }
        // A span of no length (no end recorded) closes as it opens.
        max = max.max((opened + 1).saturating_sub(closed));
    }
    max as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    fn rec(send: f64, done: f64) -> RequestRecord {
        let mut r = testing::record(0.0, 10.0, 1.0, 2);
        r.t_send_ms = send;
        r.t_done_ms = Some(done);
        r
    }

    #[test]
    fn overlap_counts_spans_open_at_once() {
        assert_eq!(max_overlap(&[]), 0);
        assert_eq!(max_overlap(&[(0.0, 10.0), (5.0, 15.0), (6.0, 7.0)]), 3);
        // Back to back: one at a time.
        assert_eq!(max_overlap(&[(0.0, 10.0), (10.0, 20.0)]), 1);
        // Spans of no length (records without an end) are never in flight.
        assert_eq!(max_overlap(&[(0.0, 0.0), (0.0, 0.0)]), 0);
        assert_eq!(max_overlap(&[(0.0, 0.0), (0.0, 5.0), (1.0, 1.0)]), 1);
    }

    #[test]
    fn a_round_of_fewer_requests_than_the_concurrency_is_under_loaded() {
        // Concurrency 4, rounds of 2 requests each: never more than 2 at once.
        let mut acc = InFlightAcc::default();
        for round in 0..3 {
            let t0 = 1000.0 * round as f64;
            acc.push(round, &rec(t0, t0 + 100.0));
            acc.push(round, &rec(t0 + 1.0, t0 + 101.0));
        }
        let r = acc.finish(Load::Concurrency(4)).unwrap();
        assert_eq!(r.client_in_flight_max, 2);
        assert!(r.under_loaded);
        // Each round's window is 101 ms, with 200 ms of requests in it.
        assert!((r.client_in_flight_mean - 200.0 / 101.0).abs() < 1e-9);
        // The same at concurrency 2 is what it claims; a rate is never marked.
        assert!(!acc.finish(Load::Concurrency(2)).unwrap().under_loaded);
        assert!(!acc.finish(Load::Rate(5.0)).unwrap().under_loaded);
        assert!(
            InFlightAcc::default()
                .finish(Load::Concurrency(1))
                .is_none()
        );
    }

    #[test]
    fn conversations_count_as_one_from_first_send_to_last_end() {
        // Two conversations of two turns with think time between: no request in
        // flight from 105 to 500 ms, yet both conversations under way.
        let mut acc = InFlightAcc::default();
        for (session, t0) in [(0u64, 0.0), (1, 5.0)] {
            for (turn, t) in [(1u32, t0), (2, t0 + 500.0)] {
                let mut r = rec(t, t + 100.0);
                r.session = Some(session);
                r.turn = Some(turn);
                acc.push(0, &r);
            }
        }
        let r = acc.finish(Load::Concurrency(2)).unwrap();
        assert_eq!(r.client_in_flight_max, 2);
        assert!(!r.under_loaded);
    }
}
