//! The drift check: the read kernel and each group's first kernel timed again at
//! the end of a run, and how far each moved from its first figure.

use tokenscope_kernel_report::{DRIFT_LIMIT, DriftCheck, KernelReport};

use super::items::{Item, run_attention, run_gemv, run_user};
use super::{Progress, SuiteConfig};
use crate::clock::Clock;
use crate::context::GpuContext;
use crate::kernels::bandwidth::{self, BandwidthPlan};

/// Times again, at the end of the run, the read kernel and the first kernel of each
/// group, and records how far each moved from its first figure
/// ([`tokenscope_kernel_report::DriftCheck`]). A kernel that cannot run again
/// is reported as an error, not a drift.
pub(super) async fn drift(
    ctx: &GpuContext,
    clock: &dyn Clock,
    cfg: &SuiteConfig,
    progress: &mut dyn Progress,
    report: &mut KernelReport,
    sentinels: &[(Item, String, f64)],
    read_gbps: f64,
) {
    let label = "drift check (the read kernel and each group's first kernel, again)";
    progress.start(label);
    let mut lines = Vec::new();
    if let Some(bw) = &report.bandwidth {
        let plan = BandwidthPlan::new(
            ctx,
            cfg.cache_bytes,
            cfg.bandwidth_multiple,
            cfg.bandwidth_cap_bytes,
        );
        match bandwidth::run(ctx, clock, plan, cfg.seed, &cfg.timing).await {
            Ok((again, _, _)) => {
                let d = DriftCheck::new(
                    "bandwidth_read".into(),
                    bw.read.median_us,
                    again.read.median_us,
                );
                lines.push(format!("read {:+.1}%", 100.0 * d.change));
                report.drift.push(d);
            }
            Err(e) => report.errors.push(format!("drift check, read: {e}")),
        }
    }
    for (item, name, first_us) in sentinels {
        let again = match item {
            Item::Gemv(s) => run_gemv(ctx, clock, cfg, *s, None, read_gbps).await,
            Item::Attention(s) => run_attention(ctx, clock, cfg, *s, read_gbps).await,
            Item::User(k, set) => run_user(ctx, clock, cfg, *k, *set, read_gbps).await,
            _ => continue,
        };
        match again {
            Ok(k) => {
                let d = DriftCheck::new(name.clone(), *first_us, k.median_us);
                lines.push(format!("{name} {:+.1}%", 100.0 * d.change));
                report.drift.push(d);
            }
            Err(e) => report.errors.push(format!("drift check, {name}: {e}")),
        }
        let _ = ctx.take_uncaptured_errors();
    }
    let drifted = report.drift.iter().filter(|d| d.drifted).count();
    progress.done(
        label,
        &format!(
            "{}{}",
            lines.join(", "),
            if drifted > 0 {
                format!(" ({drifted} moved more than {:.0}%)", 100.0 * DRIFT_LIMIT)
            } else {
                String::new()
            }
        ),
    );
}
