//! The GGUF header reader on arbitrary bytes: never panics; a prefix of the input
//! either reads the same header as the whole input or asks for more bytes within
//! the file; and the model and floor of any header it accepts never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokenscope_hw::floor::Quant;
use tokenscope_hw::gguf::{GgufError, file_floor, parse_header};

fuzz_target!(|data: &[u8]| {
    let file_len = data.len() as u64;
    let full = parse_header(data, file_len);
    let half = &data[..data.len() / 2];
    match parse_header(half, file_len) {
        Err(GgufError::NeedMore {
            needed_bytes,
            at_offset,
            ..
        }) => {
            assert!(needed_bytes <= file_len && needed_bytes > half.len() as u64);
            assert!(at_offset <= half.len() as u64);
        }
        // Compared as text: a NaN metadata value (the bytes allow any) is never
        // `==` itself, yet reads the same from the prefix as from the whole input.
        Ok(h) => assert_eq!(format!("{:?}", Ok::<_, GgufError>(h)), format!("{full:?}")),
        Err(_) => {}
    }
    if let Ok(h) = full
        && let Ok(m) = h.model()
    {
        let f = file_floor(&h, &m, 32_768, Quant::F16);
        assert!(f.weight_bytes_per_token <= h.tensor_bytes());
        let _ = m.to_model_shape(&h);
    }
});
