//! GPU kernel harness (filled by the kernel-harness work).
