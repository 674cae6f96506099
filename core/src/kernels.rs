//! The `tokenscope.kernels/1` report model (filled by the kernel-harness work).
