//! What `kernels --tune` searches for a suite: the problems its run would time.

use super::{SuiteConfig, items};
use crate::context::GpuContext;

impl SuiteConfig {
    /// The problems `kernels --tune` searches for this configuration on `ctx`: the
    /// bandwidth ceiling's read and copy, every GEMV and
    /// skinny matmul of the sweeps, the file's GEMVs, attention at every layout,
    /// format and context (single pass and split-KV), and the matrices of each timed
    /// decode step (whose shapes are the models', not the sweep's).
    pub fn tune_problems(&self, ctx: &GpuContext) -> Vec<crate::tune::search::Problem> {
        use crate::kernels::attention::AttentionSpec;
        use crate::kernels::bandwidth::{BandwidthPlan, Stream};
        use crate::tune::search::Problem;
        let mut out: Vec<Problem> = Vec::new();
        let mut push = |p: Problem| {
            if !out.contains(&p) {
                out.push(p);
            }
        };
        let plan = BandwidthPlan::new(
            ctx,
            self.cache_bytes,
            self.bandwidth_multiple,
            self.bandwidth_cap_bytes,
        );
        push(Problem::Stream(Stream::Read, plan));
        push(Problem::Stream(Stream::Copy, plan));
        for item in items::items(self) {
            match item {
                items::Item::Gemv(s) => push(Problem::Gemv(s)),
                items::Item::FileGemv(i) => push(Problem::Gemv(self.file_gemvs[i].spec)),
                items::Item::Attention(s) => push(Problem::Attention(s)),
                items::Item::Step(step) => {
                    let (layer, head) = crate::decode::matrices(&step);
                    for spec in layer.into_iter().chain([head]) {
                        if spec.validate().is_ok() {
                            push(Problem::Gemv(spec));
                        }
                    }
                    let m = &step.model;
                    push(Problem::Attention(AttentionSpec {
                        kv_dtype: step.kv_dtype,
                        heads: m.heads,
                        kv_heads: m.kv_heads,
                        head_dim: m.head_dim,
                        context: step.context,
                        split: true,
                    }));
                }
                items::Item::Beside(k) => {
                    if let Ok(spec) = items::beside_spec(self, k) {
                        push(Problem::Gemv(spec));
                    }
                }
                // A user's parameters are searched by running each set.
                items::Item::User(..) => {}
            }
        }
        out
    }
}
