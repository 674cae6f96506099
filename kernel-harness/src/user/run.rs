//! One parameter set of a user's kernel on the GPU: compiled with its values,
//! its bindings filled (copies rotated past the last-level cache), its output
//! checked once from fresh bindings, then timed like tokenscope's own kernels
//! (warm-up, dispatches back to back in one pass, the timestamps' step found
//! first), and placed against the read bandwidth.

use tokenscope_kernel_report::{KernelResult, VariantReport, VerificationReport};
use wgpu::util::DeviceExt as _;

use crate::clock::Clock;
use crate::context::GpuContext;
use crate::error::{HarnessError, KernelId, Result};
use crate::kernels::{Check, Outcome, ResultId, kernel_result, rotation_for};
use crate::shader::{Binding, Defines, Kernel, preprocess_source};
use crate::timing::{TimingOptions, Workload, measure, run_calls};
use tokenscope_kernel_spec::{Access, DEFAULT_TOLERANCE, Instance, Source, UserKernel};

/// A sample of a user's kernel lasts this long at least (ms): short kernels run
/// back to back in one pass, as a model's decode step runs them.
pub const USER_MIN_SAMPLE_MS: f64 = 1.0;

/// Where and how long to run.
#[derive(Debug, Clone, Copy)]
pub struct UserRunOptions {
    /// Timing (the timestamps' step is always looked for).
    pub timing: TimingOptions,
    /// The last-level cache the rotated bindings must exceed.
    pub cache_bytes: u64,
    /// Most copies of the bindings.
    pub max_rotation: u64,
    /// Byte budget of the copies.
    pub rotation_budget_bytes: u64,
    /// Seed of random contents.
    pub seed: u64,
}

/// The kernel's bindings, one set per rotation copy.
struct UserWorkload<'a> {
    kernel: &'a Kernel,
    groups: Vec<wgpu::BindGroup>,
    dispatch: [u32; 3],
}

impl Workload for UserWorkload<'_> {
    fn rotation(&self) -> usize {
        self.groups.len()
    }

    fn encode(&self, pass: &mut wgpu::ComputePass<'_>, iter: usize) {
        pass.set_pipeline(&self.kernel.pipeline);
        pass.set_bind_group(0, &self.groups[iter % self.groups.len()], &[]);
        let [x, y, z] = self.dispatch;
        pass.dispatch_workgroups(x, y, z);
    }
}

/// The report's identity of parameter set `inst`.
pub fn kernel_id(k: &UserKernel, inst: &Instance) -> KernelId {
    let [x, y, z] = inst.dispatch;
    KernelId {
        name: k.name.clone(),
        dtype: tokenscope_kernel_report::USER_KERNEL_DTYPE.into(),
        shape: format!(
            "dispatch {x}x{y}x{z}{}{}",
            if inst.label.is_empty() { "" } else { " " },
            inst.label
        ),
    }
}

/// The shader text for `inst` on `ctx`: its values as `{{NAME}}`, the
/// device's flags (`SUBGROUPS`, `SHADER_F16`) for `#ifdef`.
fn defines(ctx: &GpuContext, inst: &Instance) -> Defines {
    let mut d = Defines::new()
        .flag("SUBGROUPS", ctx.caps.subgroups)
        .flag("SHADER_F16", ctx.caps.shader_f16);
    for (name, v) in &inst.vars {
        d = d.value(name.clone(), v);
    }
    d
}

async fn compile(
    ctx: &GpuContext,
    kid: &KernelId,
    source: &Source,
    entry: &str,
    inst: &Instance,
    access: &[Binding],
) -> Result<Kernel> {
    let text = preprocess_source(
        &source.name,
        &source.text,
        &defines(ctx, inst),
        ctx.is_web(),
    )?;
    let key = format!("{} {}", source.name, inst.label)
        .trim_end()
        .to_string();
    ctx.compile(kid, &key, text, access, entry).await
}

/// One set of the bindings: the uniforms shared, the storage buffers its own.
fn bind_set(
    ctx: &GpuContext,
    kernel: &Kernel,
    buffers: &[&wgpu::Buffer],
    label: &str,
) -> wgpu::BindGroup {
    let res: Vec<crate::arena::Res<'_>> = buffers.iter().map(|b| (*b).into()).collect();
    ctx.bind(kernel, label, &res)
}

/// How the pipeline lays out a binding the spec declares.
fn binding(a: Access) -> Binding {
    match a {
        Access::Uniform => Binding::Uniform,
        Access::Read => Binding::Read,
        Access::ReadWrite => Binding::ReadWrite,
    }
}

fn invalid(kid: &KernelId, reason: String) -> HarnessError {
    HarnessError::InvalidShape {
        kernel: kid.clone(),
        reason,
    }
}

/// Compiles every parameter set of `k` and its reference without running them:
/// a kernel that does not compile, or whose expressions do not evaluate, is
/// reported before any time goes into measuring the roofs.
pub async fn compile_all(ctx: &GpuContext, k: &UserKernel) -> Result<()> {
    let access: Vec<Binding> = k.bindings.iter().map(|b| binding(b.access)).collect();
    let entry = k.spec.entry.as_deref().unwrap_or("main");
    for set in 0..k.param_sets().len() {
        let inst = k.instance(set).map_err(|reason| {
            invalid(
                &KernelId {
                    name: k.name.clone(),
                    dtype: tokenscope_kernel_report::USER_KERNEL_DTYPE.into(),
                    shape: format!("parameter set {}", set + 1),
                },
                reason,
            )
        })?;
        let kid = kernel_id(k, &inst);
        compile(ctx, &kid, &k.shader, entry, &inst, &access).await?;
        if let Some(r) = &k.reference {
            compile(ctx, &kid, r, "main", &inst, &access).await?;
        }
    }
    Ok(())
}

/// Runs parameter set `set` of `k`: checked (when the spec says how), timed, on
/// the roofline of `read_gbps`.
pub async fn run_user(
    ctx: &GpuContext,
    clock: &dyn Clock,
    k: &UserKernel,
    set: usize,
    opts: &UserRunOptions,
    read_gbps: f64,
) -> Result<KernelResult> {
    let inst = k.instance(set).map_err(|reason| {
        invalid(
            &KernelId {
                name: k.name.clone(),
                dtype: tokenscope_kernel_report::USER_KERNEL_DTYPE.into(),
                shape: format!("parameter set {set}"),
            },
            reason,
        )
    })?;
    let kid = kernel_id(k, &inst);
    let max_groups = u64::from(ctx.limits.max_compute_workgroups_per_dimension);
    if let Some(&d) = inst.dispatch.iter().find(|&&d| u64::from(d) > max_groups) {
        return Err(HarnessError::DeviceLimit {
            kernel: kid,
            limit: "workgroups per dimension",
            needed: u64::from(d),
            allowed: max_groups,
        });
    }
    let access: Vec<Binding> = k.bindings.iter().map(|b| binding(b.access)).collect();
    let entry = k.spec.entry.as_deref().unwrap_or("main");
    let kernel = compile(ctx, &kid, &k.shader, entry, &inst, &access).await?;

    // Contents, generated once; sizes checked against the device.
    let mut contents = Vec::new();
    for (i, (b, &n)) in k.bindings.iter().zip(&inst.elements).enumerate() {
        let bytes = b.bytes(n);
        let limit = if b.access == Access::Uniform {
            ctx.limits.max_uniform_buffer_binding_size
        } else {
            ctx.max_binding()
        };
        if bytes > limit {
            return Err(HarnessError::BindingTooLarge {
                kernel: kid,
                bytes,
                limit,
            });
        }
        let key = crate::data::key(opts.seed, 900 + i as u32);
        contents.push(
            super::fill::contents(b, n, &inst.vars, key)
                .map_err(|m| invalid(&kid, format!("binding {i}: {m}")))?,
        );
    }
    let storage_bytes: u64 = k
        .bindings
        .iter()
        .zip(&contents)
        .filter(|(b, _)| b.access != Access::Uniform)
        .map(|(_, c)| c.len() as u64)
        .sum();
    let rotation = rotation_for(
        storage_bytes,
        opts.cache_bytes,
        opts.max_rotation,
        opts.rotation_budget_bytes,
    );
    let make_set = |label: &str| -> Vec<wgpu::Buffer> {
        k.bindings
            .iter()
            .zip(&contents)
            .enumerate()
            .map(|(i, (b, c))| {
                let usage = if b.access == Access::Uniform {
                    wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST
                } else {
                    wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST
                };
                ctx.device
                    .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                        label: Some(&format!("{label} binding {i}")),
                        contents: c,
                        usage,
                    })
            })
            .collect()
    };
    let sets: Vec<Vec<wgpu::Buffer>> = ctx
        .scoped(&kid, storage_bytes * u64::from(rotation), || {
            (0..rotation)
                .map(|r| make_set(&format!("{} copy {r}", k.name)))
                .collect()
        })
        .await?;
    let groups = sets
        .iter()
        .map(|set| {
            let refs: Vec<&wgpu::Buffer> = set.iter().collect();
            bind_set(ctx, &kernel, &refs, &k.name)
        })
        .collect();
    let w = UserWorkload {
        kernel: &kernel,
        groups,
        dispatch: inst.dispatch,
    };

    // The check: the first call, from fresh bindings, against the reference.
    let mut notes = Vec::new();
    let verification = match &k.spec.check {
        Some(c) => {
            let expected = match (&k.reference, &k.expect) {
                (Some(reference), _) => {
                    let rid = KernelId {
                        name: format!("{} reference", k.name),
                        ..kid.clone()
                    };
                    let rk = compile(ctx, &rid, reference, "main", &inst, &access).await?;
                    let set = ctx
                        .scoped(&rid, storage_bytes, || make_set("reference"))
                        .await?;
                    let refs: Vec<&wgpu::Buffer> = set.iter().collect();
                    let rw = UserWorkload {
                        kernel: &rk,
                        groups: vec![bind_set(ctx, &rk, &refs, "reference")],
                        dispatch: inst.reference_dispatch,
                    };
                    run_calls(ctx, &rid, &rw, 0, 1).await?;
                    let len = contents[c.binding].len() as u64;
                    notes.push(format!(
                        "output checked against {} (binding {})",
                        reference.name, c.binding
                    ));
                    ctx.read_bytes(&set[c.binding], 0, len).await?
                }
                (None, Some(bytes)) => {
                    notes.push(format!(
                        "output checked against a file (binding {})",
                        c.binding
                    ));
                    bytes.clone()
                }
                (None, None) => unreachable!("UserKernel::new requires one"),
            };
            let b = &k.bindings[c.binding];
            let n = inst.elements[c.binding] as usize;
            if expected.len() < n * b.elem.size() as usize {
                return Err(invalid(
                    &kid,
                    format!(
                        "the expected output has {} bytes, binding {} {} ({n} x {})",
                        expected.len(),
                        c.binding,
                        n * b.elem.size() as usize,
                        b.elem.size()
                    ),
                ));
            }
            run_calls(ctx, &kid, &w, 0, 1).await?;
            let got = ctx
                .read_bytes(&sets[0][c.binding], 0, contents[c.binding].len() as u64)
                .await?;
            let tol = c.tolerance.unwrap_or(DEFAULT_TOLERANCE);
            let mut check = Check::new(&kid, n as u64);
            for i in 0..n {
                let e = b.elem.read(&expected, i);
                check.compare(
                    || format!("binding {}[{i}]", c.binding),
                    b.elem.read(&got, i),
                    e,
                    tol * e.abs().max(1.0),
                );
            }
            check.finish().0
        }
        None => {
            notes.push("output not checked (no check in the spec, no --check-binding)".into());
            VerificationReport {
                checked: 0,
                outputs: 0,
                max_abs_err: 0.0,
                max_err_over_tol: 0.0,
                failure: None,
            }
        }
    };

    let timing = TimingOptions {
        min_timestamp_sample_ms: opts.timing.min_timestamp_sample_ms.max(USER_MIN_SAMPLE_MS),
        detect_timestamp_step: true,
        ..opts.timing
    };
    let m = measure(ctx, clock, &kid, &w, &timing).await?;
    match m.timestamp_step_ns {
        Some(Some(ns)) if ns >= 1_000 => notes.push(match m.calls_per_sample {
            1 => format!(
                "timestamps step by {} us here: one dispatch outlasts 100 steps",
                ns as f64 / 1e3
            ),
            n => format!(
                "timestamps step by {} us here: {n} dispatches per sample, so that a sample lasts 100 steps",
                ns as f64 / 1e3
            ),
        }),
        Some(None) => notes.push(format!(
            "every timestamp read the same (the kernel is shorter than their step): {} dispatches per sample",
            m.calls_per_sample
        )),
        _ if m.calls_per_sample > 1 => notes.push(format!(
            "{} dispatches back to back in one pass per sample",
            m.calls_per_sample
        )),
        _ => {}
    }
    notes.push(format!(
        "{rotation} cop{} of its {} of bindings rotated",
        if rotation == 1 { "y" } else { "ies" },
        bytes_label(storage_bytes)
    ));
    let variant = VariantReport {
        name: if inst.label.is_empty() {
            "as written".into()
        } else {
            inst.label.clone()
        },
        source: if k.param_sets().len() > 1 {
            "searched".into()
        } else {
            "given".into()
        },
        note: format!("parameter set {} of {}", set + 1, k.param_sets().len()),
        search: None,
    };
    let [x, y, z] = inst.dispatch;
    let outcome = Outcome {
        timing: m.summary(&kid)?,
        samples_us: m.samples.clone(),
        verification,
        bytes_moved: inst.bytes,
        flops: inst.flops,
        reduction: "-",
        bindings: k.bindings.len() as u32,
        rotation,
        notes,
        variant: Some(variant),
    };
    Ok(kernel_result(
        ResultId {
            name: k.name.clone(),
            dtype: tokenscope_kernel_report::USER_KERNEL_DTYPE.into(),
            shape: vec![u64::from(x), u64::from(y), u64::from(z)],
            batch: 1,
            ..ResultId::default()
        },
        outcome,
        read_gbps,
    ))
}

/// `1.5 MiB`, `12 KiB`, `96 B`.
fn bytes_label(b: u64) -> String {
    match b {
        0..1024 => format!("{b} B"),
        1024..1_048_576 => format!("{:.0} KiB", b as f64 / 1024.0),
        _ => format!("{:.1} MiB", b as f64 / 1_048_576.0),
    }
}
