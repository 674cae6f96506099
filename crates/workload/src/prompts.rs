//! Synthetic prompts of a requested length, and the token estimate used for them.
//!
//! Without the model's tokenizer we approximate: **one token per word and one per
//! punctuation mark**. The synthetic prompts are made of common English words that
//! are single tokens in the Llama, Gemma, Qwen and GPT tokenizers, so a real
//! tokenizer lands close to the requested length (within about 10-20%); the
//! server's `usage.prompt_tokens` gives the exact figure and the report shows it.
//!
//! Every prompt starts differently (a request number and words drawn from its own
//! random stream), so a server's prompt cache cannot hide the prefill cost.

use tokenscope_stats::rng::Rng;

const WORDS: &[&str] = &[
    "the",
    "time",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
    "side",
    "kind",
    "head",
    "house",
    "service",
    "friend",
    "father",
    "power",
    "hour",
    "game",
    "line",
    "end",
    "member",
    "law",
    "car",
    "city",
    "name",
    "team",
    "minute",
    "idea",
    "kid",
    "body",
    "back",
    "parent",
    "face",
    "others",
    "level",
    "office",
    "door",
    "health",
    "person",
    "art",
    "war",
    "history",
    "party",
    "result",
    "change",
    "morning",
    "reason",
    "research",
    "girl",
    "guy",
    "moment",
    "air",
    "teacher",
    "force",
    "education",
    "good",
    "new",
    "first",
    "last",
    "long",
    "great",
    "little",
    "own",
    "other",
    "old",
    "big",
    "high",
    "different",
    "small",
    "large",
    "next",
    "early",
    "young",
    "important",
    "few",
    "public",
    "bad",
    "same",
    "able",
    "is",
    "was",
    "has",
    "had",
    "said",
    "made",
    "went",
    "found",
    "gave",
    "told",
    "became",
    "left",
    "felt",
    "brought",
    "began",
    "kept",
    "held",
    "wrote",
    "stood",
    "heard",
    "let",
    "meant",
    "set",
    "met",
    "ran",
    "paid",
    "sat",
    "spoke",
    "lay",
    "led",
    "read",
    "grew",
    "lost",
    "fell",
    "sent",
    "built",
    "and",
    "of",
    "to",
    "in",
    "for",
    "on",
    "with",
    "at",
    "by",
    "from",
    "up",
    "about",
    "into",
    "over",
    "after",
];

/// Estimated tokens of a text: words plus punctuation marks (see the module docs).
pub fn approx_tokens(text: &str) -> u64 {
    let mut tokens = 0u64;
    for word in text.split_whitespace() {
        let punct = word.chars().filter(|c| c.is_ascii_punctuation()).count() as u64;
        let letters = word.chars().any(|c| !c.is_ascii_punctuation());
        tokens += punct + u64::from(letters);
    }
    tokens
}

/// Estimated tokens of everything a request's prompt sends (its system prompt,
/// and its messages or its prompt), at least 1: what a simulator prefills.
pub fn approx_spec_tokens(spec: &tokenscope_measure::openai::RequestSpec) -> u64 {
    let system = spec.system.as_deref().map_or(0, approx_tokens);
    let body = match &spec.messages {
        Some(m) => m.iter().map(|m| approx_tokens(&m.content)).sum(),
        None => approx_tokens(&spec.prompt),
    };
    (system + body).max(1)
}

/// A prompt of about `tokens` tokens for request number `index` of a run seeded `seed`.
pub fn synthetic_prompt(tokens: u32, seed: u64, index: u64) -> String {
    let mut rng = Rng::for_stream(seed, index);
    let header = format!("Request {index}:");
    // "Request", "{index}", ":" are three tokens by our estimate.
    let mut out = header;
    let mut count = 3u64;
    let target = u64::from(tokens.max(4));
    let mut since_period = 0;
    while count < target {
        let remaining = target - count;
        // End sentences every 8-15 words, but never leave a lone period at the end.
        if since_period >= 8 + rng.below(8) && remaining >= 2 {
            out.push('.');
            count += 1;
            since_period = 0;
            continue;
        }
        out.push(' ');
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
        count += 1;
        since_period += 1;
    }
    out
}

/// The words synthetic prompts are made of: a tokenizer's count of each (after a
/// space) decides which make exact prompts ([`exact_prompt`]).
pub fn vocabulary() -> &'static [&'static str] {
    WORDS
}

/// A prompt of exactly `tokens` tokens for a tokenizer under which every word of
/// `single` (a subset of [`vocabulary`]) is one token after a space, and words do
/// not merge across spaces (what `bench` checks before using it): `tokens` words
/// drawn from request `index`'s own stream, so prompts differ from their first word.
pub fn exact_prompt(single: &[&str], tokens: u64, seed: u64, index: u64) -> String {
    if single.is_empty() {
        return synthetic_prompt(u32::try_from(tokens).unwrap_or(u32::MAX), seed, index);
    }
    let mut rng = Rng::for_stream(seed ^ 0xE8AC_7000, index);
    let mut out = String::new();
    for _ in 0..tokens.max(1) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(single[rng.below(single.len() as u64) as usize]);
    }
    out
}

/// The text of prefix block `hash` (a trace's block id): `tokens` of `words`
/// drawn from the block's own random stream, so the same id is the same text in
/// every prompt.
fn block_words(words: &[&str], seed: u64, hash: u64, tokens: u64, out: &mut String) {
    let mut rng = Rng::for_stream(seed ^ 0xB10C_B10C, hash);
    for _ in 0..tokens {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(words[rng.below(words.len() as u64) as usize]);
    }
}

/// A prompt of `tokens` tokens built from prefix blocks, as a trace describes it
/// (Mooncake's `hash_ids`): block `i` is the text of `hash_ids[i]`, `block_tokens`
/// long (the last one cut to fit), so prompts that share leading ids share
/// exactly that text and a server's prefix cache can reuse it. Tokens beyond the
/// listed blocks, and every token of a prompt with no ids, come from request
/// `index`'s own stream (no prefix shared). `words`: the vocabulary
/// ([`vocabulary`], about one token a word), or a tokenizer's single-token words
/// for exact lengths.
pub fn block_prompt(
    words: &[&str],
    hash_ids: &[u64],
    block_tokens: u64,
    tokens: u64,
    seed: u64,
    index: u64,
) -> String {
    let words = if words.is_empty() { WORDS } else { words };
    let block_tokens = block_tokens.max(1);
    let mut out = String::new();
    let mut left = tokens.max(1);
    for &hash in hash_ids {
        if left == 0 {
            break;
        }
        let n = left.min(block_tokens);
        block_words(words, seed, hash, n, &mut out);
        left -= n;
    }
    if left > 0 {
        // Past the shared blocks (or with none): this request's own words.
        block_words(words, seed ^ 0x5E1F, index, left, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate() {
        assert_eq!(approx_tokens("Hello, world!"), 4);
        assert_eq!(approx_tokens("  a  b\nc "), 3);
        assert_eq!(approx_tokens(""), 0);
        assert_eq!(approx_tokens("..."), 3);
    }

    #[test]
    fn exact_prompts_are_words_of_the_single_token_set() {
        let single = ["the", "time", "people"];
        let p = exact_prompt(&single, 50, 1, 7);
        let words: Vec<&str> = p.split(' ').collect();
        assert_eq!(words.len(), 50);
        assert!(words.iter().all(|w| single.contains(w)));
        assert_ne!(p, exact_prompt(&single, 50, 1, 8));
        assert_eq!(p, exact_prompt(&single, 50, 1, 7));
        assert!(vocabulary().len() > 100);
        // Without a single-token set: the approximate prompt.
        assert_eq!(approx_tokens(&exact_prompt(&[], 20, 1, 1)), 20);
    }

    #[test]
    fn block_prompts_share_exactly_their_common_blocks() {
        let a = block_prompt(WORDS, &[7, 8, 9], 16, 40, 1, 0);
        let b = block_prompt(WORDS, &[7, 8, 5], 16, 48, 1, 1);
        let c = block_prompt(WORDS, &[3, 8], 16, 20, 1, 2);
        assert_eq!(approx_tokens(&a), 40);
        assert_eq!(approx_tokens(&b), 48);
        assert_eq!(approx_tokens(&c), 20);
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let (wa, wb, wc) = (words(&a), words(&b), words(&c));
        assert_eq!(wa[..32], wb[..32], "two blocks in common");
        assert_ne!(wa[32..40], wb[32..40], "the third block differs");
        assert_ne!(wa[..16], wc[..16], "a different first block");
        // The same id is the same text wherever it stands: block 8 at position 1.
        assert_eq!(wa[16..20], wc[16..20]);
        // A prompt past its blocks, and one without ids, continue with their own words.
        let long = block_prompt(WORDS, &[7], 16, 30, 1, 3);
        assert_eq!(approx_tokens(&long), 30);
        assert_eq!(words(&long)[..16], wa[..16]);
        assert_ne!(block_prompt(WORDS, &[7], 16, 30, 1, 4), long);
        let none = block_prompt(WORDS, &[], 16, 30, 1, 5);
        assert_eq!(approx_tokens(&none), 30);
        assert_ne!(none, block_prompt(WORDS, &[], 16, 30, 1, 6));
        // Made of the words given.
        let few = block_prompt(&["a", "b"], &[1, 2], 4, 12, 1, 7);
        assert!(few.split(' ').all(|w| w == "a" || w == "b"), "{few}");
    }

    #[test]
    fn prompts_have_the_requested_length_and_differ() {
        for n in [4u32, 16, 64, 256, 512, 2048] {
            let p = synthetic_prompt(n, 1, 0);
            assert_eq!(approx_tokens(&p), u64::from(n), "{p}");
        }
        assert_ne!(synthetic_prompt(64, 1, 0), synthetic_prompt(64, 1, 1));
        assert_ne!(synthetic_prompt(64, 1, 0), synthetic_prompt(64, 2, 0));
        assert_eq!(synthetic_prompt(64, 1, 5), synthetic_prompt(64, 1, 5));
        // Prompts differ from their first words on (prompt caches match prefixes).
        let a = synthetic_prompt(64, 1, 1);
        let b = synthetic_prompt(64, 1, 2);
        assert_ne!(a.split(' ').nth(1), b.split(' ').nth(1));
    }
}
