//! The quality tests' ground truth: what the toy models the mocks (and the
//! page's simulator) serve must give, computed from the same models.

use tokenscope_quality::teacher::{CHUNK_WORDS, TEXT, chunks as cut};
use tokenscope_quality::toy_lm::{ToyLm, kld_exact};

/// The teacher-forced truth: the built-in text's first `chunks` chunks read
/// by the toy tokenizer, each chunk's tokens from `n/2 + 1` on scored
/// (llama.cpp's rule): the mean KLD and the positions scored.
pub fn forced_truth(r: ToyLm, c: ToyLm, chunks: usize) -> (f64, usize) {
    let mut klds = Vec::new();
    for chunk in cut(TEXT, CHUNK_WORDS, chunks) {
        let tokens = r.tokenize(&chunk);
        let mut state = r.text_start();
        for (i, (_, id)) in tokens.iter().enumerate() {
            // llama.cpp's: the logits from n/2 on, predicting n/2 + 1 ..
            if i > tokens.len() / 2 {
                klds.push(kld_exact(&r.logprobs(state), &c.logprobs(state)));
            }
            state = ToyLm::next(state, *id);
        }
    }
    (klds.iter().sum::<f64>() / klds.len() as f64, klds.len())
}
