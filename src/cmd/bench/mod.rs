//! `tokenscope bench`: benchmark an OpenAI-compatible streaming endpoint.
//!
//! [`args`] defines the flags, [`config`] checks them and builds the [`Plan`], and
//! [`run`] runs it tier by tier, writing each tier's reports ([`Outputs`]).

mod args;
mod config;
mod plan;

use std::process::ExitCode;

use tokenscope_core::render;
use tokenscope_core::render::tiers;
use tokenscope_core::report::ClientReport;
use tokenscope_core::workload::tokens::Tier;

use crate::engine::{self, InputLength};

pub use args::BenchArgs;

/// Run the subcommand: the sweep at each tier in turn, each tier's report
/// written as soon as it ends.
pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let (plan, outputs) = args.into_config()?;
    let rt = super::runtime()?;
    let pre = rt.block_on(async {
        let pre = engine::preflight::check(&plan.cfg).await?;
        if plan.cfg.progress {
            eprintln!(
                "benchmarking {} ({}) at {}",
                pre.model,
                plan.cfg.api.as_str(),
                crate::util::redact_url(&plan.cfg.base_url)
            );
        }
        anyhow::Ok(pre)
    })?;
    let tiered = plan.tiers.len() > 1;
    let mut done = Vec::new();
    for (i, tier) in plan.tiers.iter().enumerate() {
        if tiered {
            println!(
                "\n== tier {}/{}: input {}, max_tokens {} ==",
                i + 1,
                plan.tiers.len(),
                match tier.input {
                    InputLength::Tokens(n) => format!("{n} tokens"),
                    InputLength::OfContext(f) => format!("{f} of the context window"),
                },
                tier.max_tokens
            );
        }
        let cfg = plan.tier_config(i);
        let report =
            rt.block_on(async { anyhow::Ok(engine::run(cfg, pre.clone()).await?.report) })?;
        // Exports first (a failing terminal must not lose the files), then the table.
        let out = if tiered {
            outputs.for_tier(tier)
        } else {
            outputs.clone()
        };
        out.write(&report)?;
        print!("{}", render::client::text_summary(&report));
        if tiered {
            for p in out.paths() {
                println!("wrote {}", p.display());
            }
        }
        let interrupted = report.interrupted;
        done.push((*tier, report));
        if interrupted {
            break;
        }
    }
    if tiered {
        print!("{}", tier_summary(&done));
    }
    Ok(if done.iter().any(|(_, r)| r.interrupted) {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// The tiers side by side ([`tiers::tier_rows`]).
fn tier_summary(done: &[(Tier, ClientReport)]) -> String {
    let labelled: Vec<(String, &ClientReport)> = done.iter().map(|(t, r)| (t.label(), r)).collect();
    let (headers, rows) = tiers::tier_rows(&labelled);
    format!(
        "\nall tiers (ms):\n{}",
        tokenscope_core::render::table::text_table(&headers, &rows)
    )
}
