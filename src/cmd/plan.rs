//! `tokenscope plan`: the KV-cache memory plan of a model on a GPU, alone.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tokenscope_hw::floor::{KvPlanInput, ModelShape, Quant, preset_names};
use tokenscope_measure::parse::parse_bytes;
use tokenscope_render::kv_plan;

/// How much memory the KV cache of a model takes per token and per sequence, how
/// much its weights take, and how many sequences of a context fit in a GPU's
/// memory (core's planner: `docs/metrics.md`, "KV-cache plan").
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
  tokenscope plan --model llama-3.1-8b --gpu-memory 80GiB --context 8192
  tokenscope plan --model-config ./config.json --quant q4_0 --kv-dtype q8_0 \\
      --gpu-memory 24GB --context 32768
  tokenscope plan --model gemma-3-270m --gpu-memory 8GiB --context 4096 --json")]
pub struct PlanArgs {
    /// The model: a preset name (an unknown name lists them).
    #[arg(
        long,
        value_name = "NAME",
        conflicts_with = "model_config",
        required_unless_present = "model_config"
    )]
    pub model: Option<String>,

    /// The model: a Hugging Face config.json.
    #[arg(long, value_name = "FILE")]
    pub model_config: Option<PathBuf>,

    /// The GPU's memory: 80GiB, 24GB, 16384MiB, or bytes.
    #[arg(long, value_name = "SIZE")]
    pub gpu_memory: String,

    /// Tokens per sequence (prompt plus output).
    #[arg(long, default_value_t = 4096)]
    pub context: u64,

    /// The weights' format: f32, f16, q8_0 or q4_0.
    #[arg(long, default_value = "f16")]
    pub quant: Quant,

    /// The KV cache's element format: f32, f16 or q8_0.
    #[arg(long, default_value = "f16")]
    pub kv_dtype: Quant,

    /// The fraction of the memory the engine may use (vLLM's --gpu-memory-utilization).
    #[arg(long, default_value_t = 0.9)]
    pub utilization: f64,

    /// Also size llama.cpp's KV buffers for this many slots (llama-server
    /// `--parallel N --ctx-size N x CONTEXT`), sliding-window layers included.
    #[arg(long, value_name = "N")]
    pub llamacpp_slots: Option<u64>,

    /// Write the plan as JSON to FILE (the table still printed), or alone to
    /// stdout (`--json` or `--json -`, no table).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<PathBuf>,
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let model = match (&args.model, &args.model_config) {
        (Some(name), _) => {
            ModelShape::preset(name).map_err(|e| anyhow::anyhow!("--model {name:?}: {e}"))?
        }
        (None, Some(path)) => tokenscope_loadgen::util::model_from_config(path, "--model-config")?,
        (None, None) => anyhow::bail!(
            "--model NAME or --model-config FILE is needed (presets: {})",
            preset_names().join(", ")
        ),
    };
    let gpu_memory_bytes =
        parse_bytes(&args.gpu_memory).map_err(|e| anyhow::anyhow!("--gpu-memory {e}"))?;
    let plan = model
        .plan_kv(KvPlanInput {
            weights: args.quant,
            kv_dtype: args.kv_dtype,
            context: args.context,
            gpu_memory_bytes,
            utilization: args.utilization,
            llamacpp_slots: args.llamacpp_slots,
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let json = serde_json::to_string_pretty(&plan)? + "\n";
    match super::output::file_or_stdout(args.json) {
        Some(None) => print!("{json}"),
        Some(Some(path)) => {
            print!("{}", kv_plan::text(&plan));
            super::output::write("--json", &path, &json)?;
        }
        None => print!("{}", kv_plan::text(&plan)),
    }
    Ok(ExitCode::SUCCESS)
}
