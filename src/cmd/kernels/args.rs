//! `kernels`' command line: every flag, its help and its default.

use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use kernel_harness::BackendChoice;
use kernel_harness::suite::KernelGroup;
use tokenscope_hw::floor::Quant;

/// Options of `tokenscope kernels`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Without a GPU, install Mesa lavapipe (apt install mesa-vulkan-drivers) to run on the CPU.\n\
Environment: WGPU_BACKEND, WGPU_ADAPTER_NAME, WGPU_POWER_PREF are honoured as wgpu reads them."
)]
pub struct KernelsArgs {
    /// Adapter to use: a case-insensitive part of its name [default: the best GPU; env WGPU_ADAPTER_NAME].
    #[arg(long, value_name = "NAME")]
    pub adapter: Option<String>,
    /// Graphics backend [default: all; env WGPU_BACKEND].
    #[arg(long, value_name = "vulkan|metal|dx12|gl", value_parser = parse_backend)]
    pub backend: Option<BackendChoice>,
    /// List the adapters wgpu finds, with the features the harness uses, and exit.
    #[arg(long)]
    pub list_adapters: bool,
    /// Small shapes and few samples (CI; well under a minute on lavapipe).
    #[arg(long)]
    pub quick: bool,
    /// Model presets for the decode floor [default: all presets].
    #[arg(long, value_delimiter = ',', value_name = "MODEL,..")]
    pub models: Vec<String>,
    /// A Hugging Face config.json of a custom model, added to the floor (repeatable).
    #[arg(long, value_name = "PATH")]
    pub model_config: Vec<PathBuf>,
    /// Weight formats of the floor and the decode step [default: f16,q8_0,q4_0].
    #[arg(long, value_delimiter = ',', value_name = "f16,q8_0,q4_0")]
    pub quant: Vec<Quant>,
    /// Weight formats of the GEMV sweep [default: f32,f16,q8_0,q4_0]: any of f32,
    /// f16, bf16, q8_0, q6_k, q5_1, q5_0, q5_k, q4_1, q4_0, q4_k (a shape whose width
    /// is not a whole number of the format's blocks is listed as skipped).
    #[arg(long, value_delimiter = ',', value_name = "FORMAT,..")]
    pub formats: Vec<Quant>,
    /// Context lengths of the floor and the decode step [default: 4096,32768; --quick: 1024].
    #[arg(long, value_delimiter = ',', value_name = "TOKENS,..")]
    pub context: Vec<u32>,
    /// Models whose synthetic decode step is timed, or `none` [default: llama-3.1-8b; --quick: gemma-3-270m].
    #[arg(long, value_delimiter = ',', value_name = "MODEL,..")]
    pub decode_step: Vec<String>,
    /// Batches of the skinny matmul sweep [default: 2,4,8,16,32,64; --quick: 3,8,64].
    #[arg(long, value_delimiter = ',', value_name = "N,..")]
    pub batches: Vec<u32>,
    /// Kernel groups to run [default: all]: gemv (batch 1), skinny (matmul, batch
    /// 2..64), attention (decode), step (the synthetic decode step).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "gemv,skinny,attention,step",
        value_parser = clap::builder::PossibleValuesParser::new(KernelGroup::NAMES)
            .map(|s| s.parse::<KernelGroup>().expect("a possible value"))
    )]
    pub only: Vec<KernelGroup>,
    /// The GPU's memory (80GiB, 24GB): also print each floor model's KV-cache plan
    /// at each context (f16 KV, 0.9 of the memory; `tokenscope plan` for one in full).
    #[arg(long, value_name = "SIZE")]
    pub gpu_memory: Option<String>,
    /// Write the tokenscope.kernels/1 JSON here (rewritten after every kernel).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The old spelling of --json (kept for one release).
    #[arg(long, value_name = "FILE", hide = true, conflicts_with = "json")]
    pub out: Option<PathBuf>,
    /// Timed samples per kernel (fewer, at least 3, when one call is slow).
    #[arg(long, alias = "iterations", value_name = "N")]
    pub samples: Option<u32>,
    /// Untimed warm-up calls per kernel.
    #[arg(long, value_name = "N")]
    pub warmup: Option<u32>,
    /// Seed of the generated weights, activations and KV caches.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Last-level cache size to defeat, MiB [default: sysfs for CPU adapters, 256 for GPUs].
    #[arg(long, value_name = "MIB")]
    pub cache_mib: Option<u64>,
    /// Pretend storage bindings hold at most this many MiB (exercises the split paths).
    #[arg(long, value_name = "MIB")]
    pub max_binding_mib: Option<u64>,
    /// Do not use subgroup operations (shared-memory reductions).
    #[arg(long)]
    pub no_subgroups: bool,
    /// Do not use shader-f16 (f16 converted with unpack2x16float).
    #[arg(long)]
    pub no_f16: bool,
    /// Do not use timestamp queries (wall-clock timing).
    #[arg(long)]
    pub no_timestamps: bool,
    /// A GGUF model file: read its header (never the whole file), list its tensor
    /// types, run GEMVs at its matrices' types and shapes and attention at its head
    /// layout, and give the file's decode floor on this GPU at each --context. The
    /// generic sweeps (gemv, skinny, step) run only when named in --only.
    #[arg(long, value_name = "FILE")]
    pub gguf: Option<PathBuf>,
    /// With --gguf: run the GEMVs on the file's own weights (read one tensor at a
    /// time, verified against the CPU's dequantization of the same bytes).
    #[arg(long, requires = "gguf")]
    pub real_weights: bool,
    /// With --real-weights: tensors of each type and shape to run [default: all,
    /// the whole decode step's GEMVs].
    #[arg(long, value_name = "N", requires = "real_weights")]
    pub tensors_per_shape: Option<usize>,
    /// Search the kernel variants on this adapter first (a bounded search per kernel,
    /// format, shape and batch), write the tuning file, then run with it. Later runs on
    /// the same adapter, driver and tokenscope version read the file by themselves.
    #[arg(long)]
    pub tune: bool,
    /// Time for the whole --tune search [default: 180s; --quick: 20s].
    #[arg(long, value_name = "DURATION", value_parser = tokenscope_measure::parse::parse_duration, requires = "tune")]
    pub tune_budget: Option<std::time::Duration>,
    /// The tuning file to read (or, with --tune, to write) [default: one per adapter
    /// under the user's cache directory, ~/.cache/tokenscope/tuning/].
    #[arg(long, value_name = "FILE", conflicts_with = "no_tuning")]
    pub tuning: Option<PathBuf>,
    /// Ignore any tuning file: every kernel runs its per-vendor default variant.
    #[arg(long, conflicts_with = "tune")]
    pub no_tuning: bool,
    /// Allocate each kernel's operands on their own and free them after it (the
    /// harness before its memory arena; shows the run-order effect the arena removes).
    #[arg(long, hide = true)]
    pub no_arena: bool,
    /// Testing aid: corrupt every GEMV's weights so verification fails.
    #[arg(long, hide = true)]
    pub inject_fault: bool,
    /// Testing aid: round GPU timestamps down to this many microseconds, as a
    /// browser does (Chrome: 100).
    #[arg(long, hide = true, value_name = "US")]
    pub timestamp_quantum_us: Option<u64>,
    /// Your own WGSL compute kernel: checked, timed on this GPU like tokenscope's
    /// own (warm-up, dispatches back to back, bindings rotated past the cache) and
    /// placed on the measured roofline (read bandwidth, FMA rate). Its spec is
    /// FILE.toml or FILE.json beside it (or --spec); the flags below add to it or
    /// override it. tokenscope's own sweeps run only when named in --only.
    #[arg(long, value_name = "FILE.wgsl", help_heading = "Your own kernel")]
    pub shader: Option<PathBuf>,
    /// The kernel's spec (TOML or JSON: entry, dispatch, values, params, bindings,
    /// bytes, flops, check) [default: beside the shader, same name].
    #[arg(
        long,
        value_name = "FILE",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub spec: Option<PathBuf>,
    /// A binding of @group(0), in binding order (repeatable; replaces the spec's):
    /// `ACCESS TYPE[COUNT] [INIT]` with ACCESS uniform, read or read_write, TYPE
    /// f32, f16, u32 or i32, COUNT an expression, INIT random (read's default),
    /// zeros (read_write's), ones, file:PATH or `= V, V, ...`. E.g.
    /// --binding 'uniform u32 = M, N, K, 0' --binding 'read f32[M*K]'.
    #[arg(
        long = "binding",
        value_name = "LINE",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub bindings: Vec<String>,
    /// Workgroups to dispatch: X[,Y[,Z]], numbers or expressions over the values
    /// and parameters (+ - * / %, cdiv(a, b)).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "X,Y,Z",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub dispatch: Vec<String>,
    /// NAME=V: the value of {{NAME}} in the shader and in expressions; NAME=V,V,..:
    /// a parameter searched, every combination of the parameters run and ranked
    /// (repeatable).
    #[arg(
        long = "param",
        value_name = "NAME=V,..",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub params: Vec<String>,
    /// The kernel's entry point [default: main].
    #[arg(
        long,
        value_name = "NAME",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub entry: Option<String>,
    /// Bytes one dispatch moves, an expression [default: every storage binding
    /// read once].
    #[arg(
        long,
        value_name = "EXPR",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub bytes: Option<String>,
    /// FLOPs of one dispatch, an expression (a multiply-add counts 2) [default: 0].
    #[arg(
        long,
        value_name = "EXPR",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub flops: Option<String>,
    /// Check this binding (its index, a read_write one) after one dispatch from
    /// fresh bindings, against --reference or --expect.
    #[arg(
        long,
        value_name = "N",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub check_binding: Option<usize>,
    /// A WGSL kernel computing the same output the plain way, on the same
    /// bindings (entry point main).
    #[arg(
        long,
        value_name = "FILE.wgsl",
        requires = "shader",
        conflicts_with = "expect",
        help_heading = "Your own kernel"
    )]
    pub reference: Option<PathBuf>,
    /// The expected output: raw little-endian values of the checked binding's type.
    #[arg(
        long,
        value_name = "FILE",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub expect: Option<PathBuf>,
    /// The check passes where |gpu - expected| <= TOL * max(1, |expected|)
    /// [default: 1e-3].
    #[arg(
        long,
        value_name = "TOL",
        requires = "shader",
        help_heading = "Your own kernel"
    )]
    pub tolerance: Option<f64>,
}

fn parse_backend(s: &str) -> Result<BackendChoice, String> {
    s.parse()
}
