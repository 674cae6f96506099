//! The collector's intake (`tokenscope_core::rum::parse_batch`) on arbitrary bytes:
//! never panics; every turn it keeps validates and survives a JSON round trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokenscope_core::rum::{Turn, parse_batch};

fuzz_target!(|data: &[u8]| {
    if let Ok((turns, _rejected)) = parse_batch(data) {
        for t in turns {
            assert!(t.validate().is_ok());
            let again: Turn = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
            assert_eq!(again, t);
        }
    }
});
