//! The `/metrics` parser on arbitrary text: never panics, and every line is either
//! a comment, blank, a sample read or a line skipped (none counted twice).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokenscope_measure::prometheus::Scrape;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let s = Scrape::parse(&text);
    let read: usize = s.families.iter().map(|f| f.samples.len()).sum();
    let candidates = text
        .split('\n')
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .count();
    assert!(read + s.skipped.len() <= candidates);
    for w in s.skipped.windows(2) {
        assert!(w[0].line < w[1].line, "skipped lines in order, once each");
    }
});
