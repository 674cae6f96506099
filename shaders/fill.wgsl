// fill.wgsl: seeded, counter-based input data.
//
// Word i of a buffer is a pure function of (key, offset + i): the PCG RXS-M-XS hash,
// shaped by `mode`. kernel-harness/src/data.rs is the CPU twin, so the CPU reference
// regenerates any element without a copy of the buffer. Values are exactly
// representable in f16/f32, so conversions cannot differ between GPU and CPU.

const WG_SIZE: u32 = 256u;        // threads per workgroup

const MODE_BITS: u32 = 0u;        // the hash itself
const MODE_F32: u32 = 1u;         // one f32 in [-1, 1), 2^-23 grid
const MODE_F16_PAIR: u32 = 2u;    // two f16 in [-1, 1), 2^-10 grid
const MODE_SCALE_PAIR: u32 = 3u;  // two f16 block scales in [2^-7, 2^-6), 2^-13 grid
const MODE_BF16_PAIR: u32 = 4u;   // two bf16 in [-1, 1), 2^-7 grid

struct Params {
    words: u32,   // words to write
    key: u32,     // stream key (data::key)
    mode: u32,    // MODE_*
    offset: u32,  // logical index of word 0 (a chunk's offset within its matrix)
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;  // [words]

fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn shape(h: u32) -> u32 {
    switch params.mode {
        case 1u: {
            return bitcast<u32>(f32(i32(h >> 8u) - 8388608) * 1.1920928955078125e-7);
        }
        case 2u: {
            let a = f32(i32(h & 0x7ffu) - 1024) / 1024.0;
            let b = f32(i32((h >> 16u) & 0x7ffu) - 1024) / 1024.0;
            return pack2x16float(vec2<f32>(a, b));
        }
        case 3u: {
            let a = f32(64u + (h & 63u)) / 8192.0;
            let b = f32(64u + ((h >> 16u) & 63u)) / 8192.0;
            return pack2x16float(vec2<f32>(a, b));
        }
        case 4u: {
            let a = f32(i32(h & 0xffu) - 128) / 128.0;
            let b = f32(i32((h >> 16u) & 0xffu) - 128) / 128.0;
            return (bitcast<u32>(a) >> 16u) | (bitcast<u32>(b) & 0xffff0000u);
        }
        default: {
            return h;
        }
    }
}

@compute @workgroup_size(WG_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * nwg.y * WG_SIZE;
    for (var i = gid.x + gid.y * nwg.x * WG_SIZE; i < params.words; i += stride) {
        dst[i] = shape(pcg((params.offset + i) ^ params.key));
    }
}
