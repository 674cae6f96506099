//! Model shapes and the GPU decode-floor arithmetic (filled by the kernel-harness work).
