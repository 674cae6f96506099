//! A private `XDG_RUNTIME_DIR` for the GPU probe when the session has none.
//!
//! wgpu enables `VK_KHR_wayland_surface` wherever the Vulkan loader offers it, and
//! Mesa's device-select layer (an implicit layer on every Mesa install) then asks
//! Wayland for the default GPU while the adapters are enumerated. Without
//! `XDG_RUNTIME_DIR` (a container, a CI job, ssh), libwayland prints `error:
//! XDG_RUNTIME_DIR is invalid or not set in the environment.` on each probe. In an
//! empty private directory the probe finds no compositor and fails quietly; the
//! adapters are the same (tokenscope ranks them itself).

use std::path::PathBuf;

/// The directory made for this process, removed when dropped.
#[derive(Debug)]
pub(super) struct RuntimeDir(Option<PathBuf>);

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Whether `XDG_RUNTIME_DIR` names an existing directory.
fn usable(value: Option<std::ffi::OsString>) -> bool {
    value
        .filter(|v| !v.is_empty())
        .is_some_and(|v| std::path::Path::new(&v).is_dir())
}

/// Sets `XDG_RUNTIME_DIR` to a new private directory when it is unset or not a
/// directory. Call before any GPU work and before the process starts a thread.
pub(super) fn ensure() -> RuntimeDir {
    if usable(std::env::var_os("XDG_RUNTIME_DIR")) {
        return RuntimeDir(None);
    }
    let dir = std::env::temp_dir().join(format!("tokenscope-runtime-{}", std::process::id()));
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    if builder.create(&dir).is_err() && !dir.is_dir() {
        // No directory to give: the probe stays as noisy as before, nothing worse.
        return RuntimeDir(None);
    }
    // SAFETY: `kernels` calls this first, on the main thread, before it (or
    // anything before it: argument parsing) starts a thread; nothing reads the
    // environment concurrently.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("XDG_RUNTIME_DIR", &dir);
    }
    RuntimeDir(Some(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_existing_directory_is_usable() {
        assert!(!usable(None));
        assert!(!usable(Some("".into())));
        assert!(!usable(Some("/nonexistent/tokenscope/xdg".into())));
        assert!(usable(Some(std::env::temp_dir().into_os_string())));
    }
}
