//! A tiny seeded language model: for a prompt and the tokens after it, a
//! next-token distribution over a small vocabulary (the simulator's answer
//! words), stated exactly. `tokenscope mock` answers a request that asks for
//! log-probabilities with its greedy decode and the top-k of each step; a
//! perturbed copy (`--lm-perturb SIGMA`) adds seeded Gaussian noise of standard
//! deviation SIGMA to every logit, as a quantised or otherwise changed model
//! shifts them. Tests compute the exact figures (KLD, top-1 agreement, where the
//! greedy outputs diverge) from these distributions and compare them with what
//! `tokenscope quality` measured over HTTP.

use tokenscope_sim::answer_words;
use tokenscope_stats::rng::{Fnv1a, Rng};

/// Logit scale: logits are `SCALE` times a standard normal (a peaked but not
/// degenerate distribution: the top token holds about half the mass).
const SCALE: f64 = 2.5;

/// The model: its seed, vocabulary size and perturbation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToyLm {
    /// Seed of the logits.
    pub seed: u64,
    /// Vocabulary: the first `vocab` answer words.
    pub vocab: usize,
    /// Standard deviation of the noise added to each logit (0: none).
    pub perturb: f64,
    /// Seed of that noise.
    pub perturb_seed: u64,
}

impl ToyLm {
    /// The unperturbed model with `vocab` words (2 ..= the simulator's word count).
    pub fn new(seed: u64, vocab: usize) -> ToyLm {
        ToyLm {
            seed,
            vocab: vocab.clamp(2, answer_words().len()),
            perturb: 0.0,
            perturb_seed: 0,
        }
    }

    /// The same model with each logit moved by `sigma` times seeded noise.
    pub fn perturbed(self, sigma: f64, seed: u64) -> ToyLm {
        ToyLm {
            perturb: sigma.max(0.0),
            perturb_seed: seed,
            ..self
        }
    }

    /// Token `i`'s text at position `pos` (a word; after the first, with a
    /// leading space, so an answer is its tokens' texts joined).
    pub fn token_text(i: usize, pos: usize) -> String {
        let w = answer_words()[i];
        if pos == 0 {
            w.to_owned()
        } else {
            format!(" {w}")
        }
    }

    /// The state after the prompt (its text, hashed: FNV-1a).
    pub fn start(&self, prompt: &str) -> u64 {
        let mut h = Fnv1a::seeded(self.seed);
        h.eat(prompt.as_bytes());
        h.value()
    }

    /// The toy tokenizer of a plain text (teacher-forced scoring): one token
    /// per whitespace-separated word, its text the word (after the first, with
    /// the space before it), its id the vocabulary word it is or, for any
    /// other word, one its hash picks. Lossy, and the same on every server of
    /// one vocabulary.
    pub fn tokenize(&self, text: &str) -> Vec<(String, usize)> {
        let words = &answer_words()[..self.vocab];
        text.split_whitespace()
            .enumerate()
            .map(|(pos, w)| {
                let id = words.iter().position(|v| *v == w).unwrap_or_else(|| {
                    let mut h = Fnv1a::new();
                    h.eat(w.as_bytes());
                    (h.value() % self.vocab as u64) as usize
                });
                let text = if pos == 0 {
                    w.to_owned()
                } else {
                    format!(" {w}")
                };
                (text, id)
            })
            .collect()
    }

    /// The state before a plain text's first token (teacher-forced scoring).
    pub fn text_start(&self) -> u64 {
        self.start("")
    }

    /// The state after `token` follows `state`.
    pub fn next(state: u64, token: usize) -> u64 {
        Rng::for_stream(state, token as u64 + 1).next_u64()
    }

    /// Natural-log probabilities of each vocabulary token at `state`.
    pub fn logprobs(&self, state: u64) -> Vec<f64> {
        let mut base = Rng::for_stream(state, 0);
        let mut noise = Rng::for_stream(state ^ self.perturb_seed, 0x9e37_79b9);
        let logits: Vec<f64> = (0..self.vocab)
            .map(|_| {
                let z = SCALE * base.normal();
                let n = noise.normal();
                z + self.perturb * n
            })
            .collect();
        let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lse = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
        logits.iter().map(|l| l - lse).collect()
    }

    /// The most likely token at `state` (the lowest index on a tie).
    pub fn argmax(&self, state: u64) -> usize {
        argmax(&self.logprobs(state))
    }

    /// The greedy answer to `prompt`: `n` tokens.
    pub fn greedy(&self, prompt: &str, n: usize) -> Vec<usize> {
        let mut state = self.start(prompt);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = self.argmax(state);
            out.push(t);
            state = Self::next(state, t);
        }
        out
    }
}

/// Index of the largest value (the first on a tie).
pub fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// KL(P || Q) in nats for two full distributions given as log-probabilities.
pub fn kld_exact(p_log: &[f64], q_log: &[f64]) -> f64 {
    p_log
        .iter()
        .zip(q_log)
        .map(|(p, q)| p.exp() * (p - q))
        .sum::<f64>()
        .max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_are_normalised_and_deterministic() {
        let lm = ToyLm::new(7, 16);
        let s = lm.start("hello");
        let lp = lm.logprobs(s);
        assert_eq!(lp.len(), 16);
        let total: f64 = lp.iter().map(|l| l.exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert_eq!(lp, lm.logprobs(s));
        assert_eq!(lm.greedy("hello", 8), lm.greedy("hello", 8));
        assert_ne!(lm.start("hello"), lm.start("hellp"));
    }

    #[test]
    fn a_perturbation_moves_the_distribution_by_its_size() {
        let lm = ToyLm::new(7, 16);
        let s = lm.start("x");
        assert_eq!(
            kld_exact(&lm.logprobs(s), &lm.perturbed(0.0, 3).logprobs(s)),
            0.0
        );
        let small = kld_exact(&lm.logprobs(s), &lm.perturbed(0.05, 3).logprobs(s));
        let large = kld_exact(&lm.logprobs(s), &lm.perturbed(1.0, 3).logprobs(s));
        assert!(small > 0.0 && small < large, "{small} {large}");
    }
}
