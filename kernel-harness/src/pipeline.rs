//! Compute pipelines: a shader file preprocessed for a variant, checked against the
//! device's limits, compiled once and cached with an explicit bind group layout; and
//! bind groups of whole buffers or arena ranges.

use std::sync::Arc;

use crate::arena::Res;
use crate::context::GpuContext;
use crate::error::{HarnessError, KernelId, Result};
use crate::shader::{Binding, Defines, Kernel, ShaderFile, preprocess, workgroup_size};

impl GpuContext {
    /// Compiles (or fetches from the cache) `file` with `defines`; the bind group layout
    /// is built from `bindings`. Errors name `kernel`.
    pub async fn kernel(
        &self,
        kernel: &KernelId,
        file: ShaderFile,
        defines: &Defines,
        bindings: &[Binding],
    ) -> Result<Arc<Kernel>> {
        let key = format!("{}#{}", file.name, defines.key());
        if let Some(k) = self
            .pipelines()
            .map
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(k);
        }
        let source = preprocess(file, defines, self.is_web())?;
        let compiled = Arc::new(self.compile(kernel, &key, source, bindings, "main").await?);
        if let Ok(mut m) = self.pipelines().map.lock() {
            m.insert(key, compiled.clone());
        }
        Ok(compiled)
    }

    /// Whether this is the browser's WebGPU (shaders `enable` their extensions).
    pub fn is_web(&self) -> bool {
        self.info.backend == wgpu::Backend::BrowserWebGpu
    }

    /// Compiles preprocessed WGSL (not cached): entry point `entry`, bind group 0
    /// laid out from `bindings`, checked against the device's limits first.
    pub async fn compile(
        &self,
        kernel: &KernelId,
        key: &str,
        source: String,
        bindings: &[Binding],
        entry: &str,
    ) -> Result<Kernel> {
        let key = key.to_string();
        self.check_kernel_limits(kernel, &source, bindings)?;
        self.scoped(kernel, 0, || {
            let module = self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(&key),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                });
            let entries: Vec<wgpu::BindGroupLayoutEntry> = bindings
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                    binding: i as u32,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: match b {
                        Binding::Uniform => wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Uniform,
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        Binding::Read | Binding::ReadWrite => wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Storage {
                                read_only: *b == Binding::Read,
                            },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                    },
                    count: None,
                })
                .collect();
            let layout = self
                .device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some(&key),
                    entries: &entries,
                });
            let pipeline_layout =
                self.device
                    .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: Some(&key),
                        bind_group_layouts: &[Some(&layout)],
                        immediate_size: 0,
                    });
            let pipeline = self
                .device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&key),
                    layout: Some(&pipeline_layout),
                    module: &module,
                    entry_point: Some(entry),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants: &[],
                        // Every kernel writes its workgroup memory before reading it.
                        zero_initialize_workgroup_memory: false,
                    },
                    cache: None,
                });
            Kernel {
                pipeline,
                layout,
                label: key.clone(),
            }
        })
        .await
    }

    /// Fails with [`HarnessError::DeviceLimit`] (the suite lists the kernel as skipped)
    /// when the kernel's workgroup (`WG_SIZE` in its WGSL) or its storage bindings
    /// exceed the device's limits, instead of a pipeline validation error.
    fn check_kernel_limits(
        &self,
        kernel: &KernelId,
        source: &str,
        bindings: &[Binding],
    ) -> Result<()> {
        let l = &self.limits;
        let over = |limit: &'static str, needed: u64, allowed: u32| {
            (needed > u64::from(allowed)).then(|| HarnessError::DeviceLimit {
                kernel: kernel.clone(),
                limit,
                needed,
                allowed: u64::from(allowed),
            })
        };
        let wg = workgroup_size(source).unwrap_or(1);
        let storage = bindings.iter().filter(|b| **b != Binding::Uniform).count() as u64;
        match over(
            "invocations per workgroup",
            u64::from(wg),
            l.max_compute_invocations_per_workgroup,
        )
        .or_else(|| {
            over(
                "workgroup size x",
                u64::from(wg),
                l.max_compute_workgroup_size_x,
            )
        })
        .or_else(|| {
            over(
                "storage buffers per shader stage",
                storage,
                l.max_storage_buffers_per_shader_stage,
            )
        }) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// A bind group of `buffers` (binding i = buffers\[i\], whole buffers or ranges;
    /// [`crate::bufs!`] builds the list) for `kernel`.
    pub fn bind(&self, kernel: &Kernel, label: &str, buffers: &[Res<'_>]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &kernel.layout,
            entries: &entries,
        })
    }
}
