//! A kernel developer's own WGSL on the roofline (`tokenscope kernels --shader`,
//! the page's picked kernel): each parameter set of a
//! [`tokenscope_kernel_spec::UserKernel`] compiled with its values, its bindings
//! filled ([`fill`]) and rotated past the last-level cache, its output checked
//! against a reference shader or a file, timed as tokenscope's own kernels are,
//! and placed on the measured roofline ([`run_user`]).

pub mod fill;
mod run;

pub use run::{USER_MIN_SAMPLE_MS, UserRunOptions, compile_all, kernel_id, run_user};
