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

use crate::rng::Rng;

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
