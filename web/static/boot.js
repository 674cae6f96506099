// Loads the page's wasm (paths relative to this file, so dist/ works from any
// sub-path) and mounts the app. A load failure is reported through the
// automation contract: data-run-state="failed" and a message in #run-error.
import init, { run_app } from "./tokenscope_web.js";

function fail(message) {
  document.body.setAttribute("data-run-state", "failed");
  const el = document.getElementById("run-error");
  if (el) el.textContent = message;
}

// Two more wasm modules are imported only when needed, each loaded and
// instantiated once: the GPU module (the kernel harness on WebGPU) when the GPU
// view opens, window.tokenscopeGpu() resolving to its exports (adapter_info,
// run_kernels); the report module (the combined report's analysis) when there is
// a report to analyse, window.tokenscopeReport() resolving to its exports
// (render_report, and for a run that scraped /metrics read_scrapes and
// rebuild_report).
function lazyModule(load, wasmUrl) {
  let module;
  return () =>
    (module ??= load()
      .then(async (m) => {
        await m.default({ module_or_path: wasmUrl });
        return m;
      })
      .catch((e) => {
        module = undefined; // a later try may succeed (e.g. after a network error)
        throw e;
      }));
}
window.tokenscopeGpu = lazyModule(
  () => import("./tokenscope_web_gpu.js"),
  new URL("./tokenscope_web_gpu_bg.wasm", import.meta.url),
);
window.tokenscopeReport = lazyModule(
  () => import("./tokenscope_web_report.js"),
  new URL("./tokenscope_web_report_bg.wasm", import.meta.url),
);
// The quality module (core's quality checks) when the Quality view opens.
window.tokenscopeQuality = lazyModule(
  () => import("./tokenscope_web_quality.js"),
  new URL("./tokenscope_web_quality_bg.wasm", import.meta.url),
);

// The run module (the runner, its transports, the simulator) when a run starts,
// or when the Real users view talks to the simulator.
window.tokenscopeRun = lazyModule(
  () => import("./tokenscope_web_run.js"),
  new URL("./tokenscope_web_run_bg.wasm", import.meta.url),
);

// The chat demo (the Real users view: a chat UI with the RUM probe embedded) is
// plain JS, imported with the probe only when that view opens.
let rumDemo;
window.tokenscopeRumDemo = () =>
  (rumDemo ??= import("./rum-demo.js").catch((e) => {
    rumDemo = undefined;
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
