// Loads the page's wasm (paths relative to this file, so dist/ works from any
// sub-path) and mounts the app. A load failure is reported through the
// automation contract: data-run-state="failed" and a message in #run-error.
import init, { run_app } from "./tokenscope_web.js";

function fail(message) {
  document.body.setAttribute("data-run-state", "failed");
  const el = document.getElementById("run-error");
  if (el) el.textContent = message;
}

try {
  await init({ module_or_path: new URL("./tokenscope_web_bg.wasm", import.meta.url) });
  // The app replaces #app's content (including the loading #run-error).
  document.getElementById("app").textContent = "";
  run_app(new URL("./net-worker.js", import.meta.url).href);
} catch (e) {
  fail(`tokenscope could not start: ${e}`);
}
