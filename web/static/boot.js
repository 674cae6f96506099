// Loads the page's wasm (paths relative to this file, so dist/ works from any
// sub-path) and mounts the app. A load failure is reported through the
// automation contract: data-run-state="failed" and a message in #run-error.
import init, { run_app } from "./tokenscope_web.js";

function fail(message) {
  document.body.setAttribute("data-run-state", "failed");
  const el = document.getElementById("run-error");
  if (el) el.textContent = message;
}

// The GPU module (the kernel harness on WebGPU) is a second wasm, imported only
// when the GPU view opens: window.tokenscopeGpu() resolves to its exports
// (adapter_info, run_kernels), loading and instantiating it once.
let gpuModule;
window.tokenscopeGpu = () =>
  (gpuModule ??= import("./tokenscope_gpu.js")
    .then(async (m) => {
      await m.default({ module_or_path: new URL("./tokenscope_gpu_bg.wasm", import.meta.url) });
      return m;
    })
    .catch((e) => {
      gpuModule = undefined; // a later try may succeed (e.g. after a network error)
      throw e;
    }));

try {
  await init({ module_or_path: new URL("./tokenscope_web_bg.wasm", import.meta.url) });
  // The app replaces #app's content (including the loading #run-error).
  document.getElementById("app").textContent = "";
  run_app(new URL("./net-worker.js", import.meta.url).href);
} catch (e) {
  fail(`tokenscope could not start: ${e}`);
}
