//! The cluster bootstrap, defined once: a resample draws as many groups as there
//! are, uniformly with replacement, each group whole (a request's inter-token
//! gaps, a prompt's positions: values that move together), and a statistic's
//! draws give its 95% percentile interval. `compare`'s percentile differences
//! and `history`'s error bars ([`super::compare`]) and the quality check's KLD
//! interval (`quality::measure`) stand on it. Each caller seeds its own [`Rng`],
//! so the same inputs give the same interval.

use super::stats::percentile;
use crate::rng::Rng;

/// The random stream `compare`'s bootstraps draw from for `seed`.
pub fn rng(seed: u64) -> Rng {
    Rng::for_stream(seed, 0xB007)
}

/// One resample of `groups`: `groups.len()` of them drawn uniformly with
/// replacement (one `rng.below(len)` each, in order).
pub fn resample<'a, T>(groups: &'a [T], rng: &'a mut Rng) -> impl Iterator<Item = &'a T> + 'a {
    let n = groups.len() as u64;
    (0..n).map(move |_| &groups[rng.below(n) as usize])
}

/// The 2.5th and 97.5th percentiles of a statistic's bootstrap `draws` (core's
/// one percentile definition, NaN left out); `None` without a draw.
pub fn interval_95(draws: &[f64]) -> Option<[f64; 2]> {
    Some([percentile(draws, 0.025)?, percentile(draws, 0.975)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resample_draws_as_many_whole_groups_as_there_are() {
        let groups = [vec![1.0, 2.0], vec![3.0], vec![4.0, 5.0, 6.0]];
        let mut rng = rng(7);
        let mut seen = [0usize; 3];
        for _ in 0..3000 {
            let drawn: Vec<&Vec<f64>> = resample(&groups, &mut rng).collect();
            assert_eq!(drawn.len(), 3);
            for g in drawn {
                seen[groups.iter().position(|x| x == g).unwrap()] += 1;
            }
        }
        // Uniform: each group about a third of 9000 draws (sd ~45).
        assert!(seen.iter().all(|&n| (2700..3300).contains(&n)), "{seen:?}");
        assert_eq!(resample::<u8>(&[], &mut rng).count(), 0);
    }

    #[test]
    fn the_interval_spans_the_middle_95_percent_of_the_draws() {
        let draws: Vec<f64> = (0..=1000).map(f64::from).collect();
        assert_eq!(interval_95(&draws), Some([25.0, 975.0]));
        assert_eq!(interval_95(&[f64::NAN]), None);
    }
}
