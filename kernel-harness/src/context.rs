//! Adapter choice, device creation with the adapter's own limits, buffers, readback and
//! error scopes.
//!
//! Everything here is `async` and portable; the only native-only piece is
//! [`GpuContext::pump`], which drives wgpu's callbacks with `device.poll` (in a browser
//! the event loop drives them and `pump` does nothing).

use std::str::FromStr;
use std::sync::{Arc, Mutex};

use tokenscope_kernel_report::{AdapterReport, AvailableFeatures, FeatureReport, LimitsReport};
use wgpu::util::DeviceExt;

use crate::arena::{Arena, Slice};
use crate::error::{HarnessError, KernelId, Result};
use crate::shader::PipelineCache;
use crate::sync::oneshot;
use crate::tune::Tuning;

/// A graphics backend the user can ask for with `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// Vulkan (Linux, Windows, Android; Mesa lavapipe on the CPU).
    Vulkan,
    /// Metal (macOS, iOS).
    Metal,
    /// Direct3D 12 (Windows).
    Dx12,
    /// OpenGL / GLES (fallback; no f16, no subgroups).
    Gl,
    /// The browser's WebGPU (wasm32 builds).
    WebGpu,
}

impl BackendChoice {
    fn backends(self) -> wgpu::Backends {
        match self {
            BackendChoice::Vulkan => wgpu::Backends::VULKAN,
            BackendChoice::Metal => wgpu::Backends::METAL,
            BackendChoice::Dx12 => wgpu::Backends::DX12,
            BackendChoice::Gl => wgpu::Backends::GL,
            BackendChoice::WebGpu => wgpu::Backends::BROWSER_WEBGPU,
        }
    }
}

impl FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "vulkan" | "vk" => Ok(BackendChoice::Vulkan),
            "metal" | "mtl" => Ok(BackendChoice::Metal),
            "dx12" | "d3d12" => Ok(BackendChoice::Dx12),
            "gl" | "gles" | "opengl" => Ok(BackendChoice::Gl),
            "webgpu" => Ok(BackendChoice::WebGpu),
            other => Err(format!(
                "unknown backend `{other}`; expected vulkan, metal, dx12 or gl"
            )),
        }
    }
}

/// How to pick the adapter and which optional features to use.
#[derive(Debug, Clone, Default)]
pub struct AdapterOptions {
    /// Case-insensitive substring of the adapter name (falls back to `WGPU_ADAPTER_NAME`).
    pub name: Option<String>,
    /// Backend to use (falls back to `WGPU_BACKEND`, then all backends).
    pub backend: Option<BackendChoice>,
    /// Do not use subgroup operations (forces the shared-memory reductions).
    pub disable_subgroups: bool,
    /// Do not use `shader-f16` (f16 data is converted with `unpack2x16float`).
    pub disable_f16: bool,
    /// Do not use timestamp queries (forces wall-clock timing).
    pub disable_timestamps: bool,
    /// Allocate every operand on its own, freed after its kernel (the harness before
    /// [`crate::arena`]; kept to show the difference the arena makes).
    pub no_arena: bool,
}

/// One adapter, as listed by `--list-adapters`.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterSummary {
    /// Name.
    pub name: String,
    /// Backend.
    pub backend: String,
    /// Device type.
    pub device_type: String,
    /// Driver and its info.
    pub driver: String,
    /// Features the harness can use.
    pub features: AvailableFeatures,
}

/// Optional features in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Timestamp queries.
    pub timestamp_query: bool,
    /// `shader-f16`.
    pub shader_f16: bool,
    /// Subgroup operations.
    pub subgroups: bool,
}

impl Caps {
    fn of(features: wgpu::Features) -> Caps {
        Caps {
            timestamp_query: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            subgroups: features.contains(wgpu::Features::SUBGROUP),
        }
    }

    fn report(self) -> AvailableFeatures {
        AvailableFeatures {
            timestamp_query: self.timestamp_query,
            shader_f16: self.shader_f16,
            subgroups: self.subgroups,
        }
    }
}

fn backends_for(choice: Option<BackendChoice>) -> wgpu::Backends {
    match choice {
        Some(c) => c.backends(),
        None => wgpu::Backends::all().with_env(),
    }
}

fn new_instance(choice: Option<BackendChoice>) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = backends_for(choice);
    wgpu::Instance::new(desc)
}

fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let ty = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    };
    let backend = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::BrowserWebGpu => 1,
        _ => 2,
    };
    (ty, backend)
}

fn summary(adapter: &wgpu::Adapter) -> AdapterSummary {
    let info = adapter.get_info();
    AdapterSummary {
        name: info.name.clone(),
        backend: info.backend.to_str().to_string(),
        device_type: format!("{:?}", info.device_type),
        driver: format!("{} {}", info.driver, info.driver_info)
            .trim()
            .to_string(),
        features: Caps::of(adapter.features()).report(),
    }
}

/// Lists the adapters of a backend (all when `None`), best first.
pub async fn list_adapters(backend: Option<BackendChoice>) -> Vec<AdapterSummary> {
    let instance = new_instance(backend);
    let mut adapters = instance.enumerate_adapters(backends_for(backend)).await;
    adapters.sort_by_key(|a| rank(&a.get_info()));
    adapters.iter().map(summary).collect()
}

async fn choose_adapter(instance: &wgpu::Instance, opts: &AdapterOptions) -> Result<wgpu::Adapter> {
    let backends = backends_for(opts.backend);
    let wanted = opts
        .name
        .clone()
        .or_else(|| std::env::var("WGPU_ADAPTER_NAME").ok())
        .filter(|n| !n.trim().is_empty());
    let mut adapters = instance.enumerate_adapters(backends).await;
    adapters.sort_by_key(|a| rank(&a.get_info()));
    if let Some(name) = &wanted {
        let needle = name.to_ascii_lowercase();
        let found: Vec<String> = adapters
            .iter()
            .map(|a| {
                let i = a.get_info();
                format!("{} ({}, {:?})", i.name, i.backend.to_str(), i.device_type)
            })
            .collect();
        return adapters
            .into_iter()
            .find(|a| a.get_info().name.to_ascii_lowercase().contains(&needle))
            .ok_or_else(|| HarnessError::NoAdapter {
                wanted: format!(" matching \"{name}\""),
                found,
            });
    }
    if let Some(best) = adapters.into_iter().next() {
        return Ok(best);
    }
    // The browser's WebGPU cannot enumerate; ask for the default one.
    instance
        .request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::from_env()
                .unwrap_or(wgpu::PowerPreference::HighPerformance),
            ..Default::default()
        })
        .await
        .map_err(|_| HarnessError::NoAdapter {
            wanted: String::new(),
            found: Vec::new(),
        })
}

/// The device the harness runs on, with what it can use.
pub struct GpuContext {
    /// The adapter.
    pub adapter: wgpu::Adapter,
    /// The device, created with the adapter's own limits.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Adapter information.
    pub info: wgpu::AdapterInfo,
    /// Features in use.
    pub caps: Caps,
    /// Features the adapter offers.
    pub available: Caps,
    /// The limits requested (the adapter's).
    pub limits: wgpu::Limits,
    errors: Arc<Mutex<Vec<String>>>,
    pipelines: PipelineCache,
    binding_limit: Option<u64>,
    timestamp_quantum_ns: Option<u64>,
    tuning: Tuning,
    arena: Option<Arena>,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .field("caps", &self.caps)
            .finish()
    }
}

impl GpuContext {
    /// Picks an adapter (by name, backend, environment) and creates a device with the
    /// adapter's limits and the optional features the harness uses.
    pub async fn new(opts: &AdapterOptions) -> Result<GpuContext> {
        let instance = new_instance(opts.backend);
        let adapter = choose_adapter(&instance, opts).await?;
        let info = adapter.get_info();
        let available = Caps::of(adapter.features());
        let caps = Caps {
            timestamp_query: available.timestamp_query && !opts.disable_timestamps,
            shader_f16: available.shader_f16 && !opts.disable_f16,
            subgroups: available.subgroups && !opts.disable_subgroups,
        };
        let mut features = wgpu::Features::empty();
        if caps.timestamp_query {
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        if caps.shader_f16 {
            features |= wgpu::Features::SHADER_F16;
        }
        if caps.subgroups {
            features |= wgpu::Features::SUBGROUP;
        }
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("tokenscope kernel harness"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| HarnessError::RequestDevice {
                adapter: info.name.clone(),
                message: e.to_string(),
            })?;
        let arena = (!opts.no_arena).then(|| {
            Arena::new(
                u64::from(limits.min_storage_buffer_offset_alignment),
                limits.max_buffer_size,
            )
        });
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = errors.clone();
        // Errors outside an error scope must not panic the process (wgpu's default):
        // record them and surface them as typed errors at the next check.
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        Ok(GpuContext {
            adapter,
            device,
            queue,
            info,
            caps,
            available,
            limits,
            errors,
            pipelines: PipelineCache::default(),
            binding_limit: None,
            timestamp_quantum_ns: None,
            tuning: Tuning::none(),
            arena,
        })
    }

    pub(crate) fn pipelines(&self) -> &PipelineCache {
        &self.pipelines
    }

    /// The variants kernels compile in: a tuning file for this adapter, or defaults.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// Sets the tuning (kernels compiled from now on follow it).
    pub fn set_tuning(&mut self, tuning: Tuning) {
        self.tuning = tuning;
    }

    /// Whether the adapter is a CPU implementation (lavapipe, SwiftShader, WARP).
    pub fn is_cpu(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The adapter section of the report.
    pub fn adapter_report(&self) -> AdapterReport {
        AdapterReport {
            name: self.info.name.clone(),
            backend: self.info.backend.to_str().to_string(),
            device_type: format!("{:?}", self.info.device_type),
            driver: self.info.driver.clone(),
            driver_info: self.info.driver_info.clone(),
            vendor_id: self.info.vendor,
            device_id: self.info.device,
            subgroup_min_size: self.info.subgroup_min_size,
            subgroup_max_size: self.info.subgroup_max_size,
        }
    }

    /// The features section of the report.
    pub fn features_report(&self) -> FeatureReport {
        FeatureReport {
            timestamp_query: self.caps.timestamp_query,
            shader_f16: self.caps.shader_f16,
            subgroups: self.caps.subgroups,
            available: Some(self.available.report()),
        }
    }

    /// The limits section of the report.
    pub fn limits_report(&self) -> LimitsReport {
        let l = &self.limits;
        LimitsReport {
            max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
            max_buffer_size: l.max_buffer_size,
            max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
            max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_compute_workgroup_size_x: l.max_compute_workgroup_size_x,
            max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
            max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
        }
    }

    /// Largest storage binding the harness uses, rounded down to a multiple of 256
    /// bytes: the device's limit, or a smaller one set with [`Self::set_binding_limit`].
    pub fn max_binding(&self) -> u64 {
        let device = self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size);
        self.binding_limit.map_or(device, |l| l.min(device)) & !255
    }

    /// Pretends bindings are at most `bytes` (at least 256), so that matrices and KV
    /// caches are split across bindings as on a device with a small limit.
    pub fn set_binding_limit(&mut self, bytes: Option<u64>) {
        self.binding_limit = bytes.map(|b| b.max(256));
    }

    /// Testing aid: rounds every GPU timestamp down to a multiple of `ns`, as a
    /// browser does (Chrome: 100 us without its developer flag), so that the
    /// harness's handling of coarse timestamps runs on any adapter.
    pub fn set_timestamp_quantum(&mut self, ns: Option<u64>) {
        self.timestamp_quantum_ns = ns.filter(|&n| n > 1);
    }

    /// The rounding [`Self::set_timestamp_quantum`] set, nanoseconds.
    pub fn timestamp_quantum_ns(&self) -> Option<u64> {
        self.timestamp_quantum_ns
    }

    /// Drives wgpu's callbacks until the queue is idle. Native only: in a browser the
    /// event loop does this and awaiting the callback's channel is enough.
    pub fn pump(&self) {
        #[cfg(not(target_arch = "wasm32"))]
        {
            // An error here means the device was lost; the next operation reports it.
            let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
        }
    }

    /// Waits until all submitted work has finished.
    pub async fn wait_idle(&self) {
        let (tx, rx) = oneshot();
        self.queue.on_submitted_work_done(move || tx.send(()));
        self.pump();
        let _ = rx.await;
    }

    /// Takes the errors wgpu reported outside error scopes since the last call.
    pub fn take_uncaptured_errors(&self) -> Vec<String> {
        self.errors
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }

    /// Fails with the first uncaptured wgpu error, if any, attributed to `kernel`.
    pub fn check_errors(&self, kernel: &KernelId) -> Result<()> {
        match self.take_uncaptured_errors().into_iter().next() {
            Some(message) => Err(HarnessError::Wgpu {
                kernel: kernel.clone(),
                message,
            }),
            None => Ok(()),
        }
    }

    /// Runs `f` inside out-of-memory and validation error scopes and turns a captured
    /// error into a typed one naming `kernel`.
    pub async fn scoped<T>(
        &self,
        kernel: &KernelId,
        bytes: u64,
        f: impl FnOnce() -> T,
    ) -> Result<T> {
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let out = f();
        if let Some(e) = oom.pop().await {
            drop(validation);
            return Err(HarnessError::OutOfMemory {
                kernel: kernel.clone(),
                bytes,
                message: e.to_string(),
            });
        }
        if let Some(e) = validation.pop().await {
            return Err(HarnessError::Wgpu {
                kernel: kernel.clone(),
                message: e.to_string(),
            });
        }
        Ok(out)
    }

    /// A storage buffer of `size` bytes (rounded up to 4), zero-filled.
    pub fn storage(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Device memory for a large operand (weights, a KV cache): a range of the arena's
    /// blocks (zero-filled only when the block is new), or its own buffer without the
    /// arena.
    pub fn operand(&self, label: &str, size: u64) -> Slice {
        self.operand_apart(label, size, None)
    }

    /// [`Self::operand`] in another buffer than `apart` (for a kernel that writes it
    /// while reading `apart`).
    pub fn operand_apart(&self, label: &str, size: u64, apart: Option<&Slice>) -> Slice {
        match &self.arena {
            Some(a) => a.alloc(size, apart, |bytes| {
                self.storage(&format!("arena block ({} MiB)", bytes >> 20), bytes)
            }),
            None => Slice::whole(self.storage(label, size)),
        }
    }

    /// Blocks and bytes the arena holds (0 without it).
    pub fn arena_footprint(&self) -> (usize, u64) {
        self.arena.as_ref().map_or((0, 0), Arena::footprint)
    }

    /// Writes `data` at `at` bytes into `s`.
    pub fn write_slice(&self, s: &Slice, at: u64, data: &[u8]) {
        self.queue.write_buffer(&s.buffer, s.offset + at, data);
    }

    /// A storage buffer holding `data`.
    pub fn storage_init(&self, label: &str, data: &[u8]) -> wgpu::Buffer {
        let mut padded;
        let contents = if !data.len().is_multiple_of(4) || data.is_empty() {
            padded = data.to_vec();
            padded.resize(data.len().max(4).next_multiple_of(4), 0);
            &padded[..]
        } else {
            data
        };
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            })
    }

    /// A uniform buffer holding `value`.
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(value),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            })
    }

    /// Copies `size` bytes at `offset` of `buffer` back to the host.
    pub async fn read_bytes(
        &self,
        buffer: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Result<Vec<u8>> {
        let label = format!("readback staging ({} bytes)", size);
        let padded = size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(&label),
            size: padded,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("readback copy"),
            });
        enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, padded);
        self.queue.submit([enc.finish()]);
        let (tx, rx) = oneshot();
        staging.map_async(wgpu::MapMode::Read, .., move |r| tx.send(r));
        self.pump();
        let mapped = rx.await.ok_or_else(|| HarnessError::Readback {
            label: label.clone(),
            message: "map callback dropped".into(),
        })?;
        mapped.map_err(|e| HarnessError::Readback {
            label: label.clone(),
            message: e.to_string(),
        })?;
        let bytes = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| HarnessError::Readback {
                    label: label.clone(),
                    message: e.to_string(),
                })?;
            view[..size as usize].to_vec()
        };
        staging.unmap();
        Ok(bytes)
    }

    /// Reads back `count` f32 values starting at element `first`.
    pub async fn read_f32(
        &self,
        buffer: &wgpu::Buffer,
        first: u64,
        count: u64,
    ) -> Result<Vec<f32>> {
        let bytes = self.read_bytes(buffer, first * 4, count * 4).await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Reads back `count` u32 values starting at element `first`.
    pub async fn read_u32(
        &self,
        buffer: &wgpu::Buffer,
        first: u64,
        count: u64,
    ) -> Result<Vec<u32>> {
        let bytes = self.read_bytes(buffer, first * 4, count * 4).await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Workgroup counts for `groups` workgroups, folded into 2-D when one dimension
    /// is not enough. Shaders rebuild the linear index as `x + y * nwg.x`.
    pub fn grid(&self, groups: u32) -> (u32, u32) {
        let max = self.limits.max_compute_workgroups_per_dimension.max(1);
        if groups <= max {
            (groups.max(1), 1)
        } else {
            let y = groups.div_ceil(max);
            (groups.div_ceil(y), y)
        }
    }
}
