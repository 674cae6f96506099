//! Property: for generated event streams, every way of splitting the bytes yields
//! the same events as feeding them whole.

use proptest::prelude::*;
use tokenscope_measure::sse::{Decoder, Event};

#[derive(Debug, Clone)]
enum Line {
    Data(String),
    Event(String),
    Id(String),
    Retry(u32),
    Comment(String),
    Unknown(String),
    NoColon(String),
    Blank,
}

fn value() -> impl Strategy<Value = String> {
    // Printable text with multi-byte characters, colons and leading spaces; no line breaks.
    proptest::string::string_regex("[ a-zA-Z0-9:é€👋\\[\\]{}\"]{0,12}").unwrap()
}

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        4 => value().prop_map(Line::Data),
        1 => value().prop_map(Line::Event),
        1 => value().prop_map(Line::Id),
        1 => any::<u32>().prop_map(Line::Retry),
        1 => value().prop_map(Line::Comment),
        1 => value().prop_map(Line::Unknown),
        1 => proptest::string::string_regex("data|event|id|retry|x").unwrap().prop_map(Line::NoColon),
        3 => Just(Line::Blank),
    ]
}

fn render(lines: &[(Line, u8)], bom: bool, final_break: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if bom {
        out.extend_from_slice(&[0xEF, 0xBB, 0xBF]);
    }
    for (i, (line, ending)) in lines.iter().enumerate() {
        let text = match line {
            Line::Data(v) => format!("data: {v}"),
            Line::Event(v) => format!("event:{v}"),
            Line::Id(v) => format!("id: {v}"),
            Line::Retry(v) => format!("retry: {v}"),
            Line::Comment(v) => format!(":{v}"),
            Line::Unknown(v) => format!("foo: {v}"),
            Line::NoColon(v) => v.clone(),
            Line::Blank => String::new(),
        };
        out.extend_from_slice(text.as_bytes());
        if i + 1 < lines.len() || final_break {
            out.extend_from_slice(match ending % 3 {
                0 => b"\n".as_slice(),
                1 => b"\r".as_slice(),
                _ => b"\r\n".as_slice(),
            });
        }
    }
    out
}

fn decode(chunks: &[&[u8]]) -> Vec<Event> {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out).unwrap();
    }
    out.extend(d.finish());
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_split_gives_the_same_events(
        lines in proptest::collection::vec((line(), 0u8..3), 0..24),
        bom in any::<bool>(),
        final_break in any::<bool>(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let bytes = render(&lines, bom, final_break);
        let whole = decode(&[&bytes]);
        // Every single split point.
        for i in 0..=bytes.len() {
            let (a, b) = bytes.split_at(i);
            prop_assert_eq!(&decode(&[a, b]), &whole, "split at {}", i);
        }
        // Byte by byte.
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(&decode(&singles), &whole);
        // Random multi-way splits.
        if !bytes.is_empty() {
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut prev = 0;
            for p in points {
                chunks.push(&bytes[prev..p]);
                prev = p;
            }
            chunks.push(&bytes[prev..]);
            prop_assert_eq!(&decode(&chunks), &whole);
        }
    }

    #[test]
    fn data_round_trips(values in proptest::collection::vec(value(), 1..6), ending in 0u8..3) {
        let lines: Vec<(Line, u8)> = values
            .iter()
            .map(|v| (Line::Data(v.clone()), ending))
            .chain(std::iter::once((Line::Blank, ending)))
            .collect();
        let events = decode(&[&render(&lines, false, true)]);
        prop_assert_eq!(events.len(), 1);
        prop_assert_eq!(&events[0].data, &values.join("\n"));
        prop_assert!(events[0].terminated);
    }
}
