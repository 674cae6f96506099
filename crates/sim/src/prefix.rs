//! The simulator's prefix cache (`tokenscope mock --prefix-cache`): a prompt's
//! leading words that an earlier prompt began with are "cached", as a server's
//! prefix cache keeps the KV of prompts it has seen; they cost no prefill and the
//! answer's `usage.prompt_tokens_details.cached_tokens` counts them. Words stand
//! for tokens (the mock counts words), and only prompts are kept, not answers
//! (vLLM also keeps a finished answer's full blocks; llama.cpp its slot's last
//! answer): a conversation's turn reuses the earlier turns' prompts.

use std::collections::HashSet;

/// Most prefixes kept; past it the cache starts over (as an evicting cache would
/// forget, without growing without bound).
pub const MAX_PREFIXES: usize = 1 << 20;

/// Every prefix of every prompt seen, by a hash of its words.
#[derive(Debug, Default, Clone)]
pub struct PrefixCache {
    seen: HashSet<u64>,
}

/// The rolling hashes of `words`' prefixes, shortest first (FNV-1a over the
/// words, each followed by a separator byte).
fn prefix_hashes<'a>(words: impl Iterator<Item = &'a str>) -> impl Iterator<Item = u64> {
    let mut h = tokenscope_stats::rng::Fnv1a::new();
    words.map(move |w| {
        h.eat(w.as_bytes());
        h.eat(&[0x1f]);
        h.value()
    })
}

impl PrefixCache {
    /// How many of `text`'s leading words an earlier prompt began with, then
    /// keep `text`'s own prefixes.
    pub fn lookup_and_keep(&mut self, text: &str) -> usize {
        let hashes: Vec<u64> = prefix_hashes(text.split_whitespace()).collect();
        let cached = hashes.iter().take_while(|h| self.seen.contains(h)).count();
        if self.seen.len() + hashes.len() > MAX_PREFIXES {
            self.seen.clear();
        }
        self.seen.extend(hashes);
        cached
    }
}

/// `text`'s first `words` words, as they stand.
pub fn leading_words(text: &str, words: usize) -> String {
    text.split_whitespace()
        .take(words)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_reuses_the_words_an_earlier_one_began_with() {
        let mut c = PrefixCache::default();
        assert_eq!(c.lookup_and_keep("a b c d"), 0, "nothing seen yet");
        assert_eq!(
            c.lookup_and_keep("a b c d e f"),
            4,
            "the whole first prompt"
        );
        assert_eq!(c.lookup_and_keep("a b x"), 2);
        assert_eq!(c.lookup_and_keep("b c"), 0, "a prefix, not a substring");
        assert_eq!(
            c.lookup_and_keep("a  b\tc d e f g"),
            6,
            "words, not spacing"
        );
        assert_eq!(c.lookup_and_keep("ab"), 0, "word boundaries count");
        assert_eq!(leading_words("a  b c", 2), "a b");
    }
}
