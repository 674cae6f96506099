#!/usr/bin/env bash
# Validates the deployment files offline (no cluster):
#   - every Kubernetes manifest in deploy/kubernetes against the Kubernetes JSON
#     schemas bundled by kubernetes-validate (strict: unknown fields fail), for the
#     oldest and the newest Kubernetes version it bundles; and what
#     `kubectl apply -k deploy/kubernetes` would apply (`kubectl kustomize`
#     output), when kubectl is installed;
#   - podmonitor.yaml (a prometheus-operator CRD, no schema bundled): its
#     structure, checked here apart (apiVersion/kind, selector, endpoints' fields);
#   - kustomization.yaml is kustomize's config, not a resource: checked by
#     rendering it (above);
#   - deploy/prometheus/prometheus.yml with `promtool check config`, and every
#     PromQL expression of deploy/grafana/tokenscope.json parsed by
#     `promtool check rules`, when promtool is installed (Debian: prometheus).
# tests/e2e/deploy.rs checks what the files mean (shard count, ports, paths, users).
#
# kubernetes-validate is installed on first use into a venv under
# ${XDG_CACHE_HOME:-~/.cache}/tokenscope/ (about 150 MB; PyPI must be reachable once).
# Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

KV_VERSION=1.37.0
venv=${XDG_CACHE_HOME:-$HOME/.cache}/tokenscope/kubernetes-validate-$KV_VERSION
kv=$venv/bin/kubernetes-validate
if [[ ! -x $kv ]]; then
    echo "== installing kubernetes-validate $KV_VERSION into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KV_VERSION"
fi

fail=0
k8s=deploy/kubernetes
manifests=()
for f in "$k8s"/*.yaml; do
    case $(basename "$f") in
        kustomization.yaml | podmonitor.yaml) ;;
        *) manifests+=("$f") ;;
    esac
done

# The oldest and the newest schema versions bundled.
schemas=$("$venv/bin/python" -c 'import kubernetes_validate.utils as u, os
d = os.path.join(os.path.dirname(u.__file__), "kubernetes-json-schema")
v = sorted({tuple(map(int, n[1:].split("-")[0].split("."))) for n in os.listdir(d) if n.startswith("v")})
print(".".join(map(str, v[0])), ".".join(map(str, v[-1])))')
for version in $schemas; do
    echo "== kubernetes-validate --strict (Kubernetes $version): ${manifests[*]}"
    "$kv" --strict --quiet -k "$version" "${manifests[@]}" || fail=1
done

if command -v kubectl >/dev/null; then
    echo "== kubectl kustomize $k8s | kubernetes-validate --strict"
    rendered=$(mktemp)
    trap 'rm -f "$rendered"' EXIT
    if kubectl kustomize "$k8s" >"$rendered"; then
        "$kv" --strict --quiet "$rendered" || fail=1
    else
        echo "FAIL: kubectl kustomize $k8s"
        fail=1
    fi
else
    echo "== skipped: kubectl kustomize (kubectl not installed)"
fi

echo "== podmonitor.yaml: PodMonitor structure (a CRD, no schema bundled)"
"$venv/bin/python" - "$k8s/podmonitor.yaml" <<'PY' || fail=1
import sys, yaml
path = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(path)) if d]
errors = []
def err(m): errors.append(m)
if len(docs) != 1: err(f"expected one document, found {len(docs)}")
d = docs[0]
if d.get("apiVersion") != "monitoring.coreos.com/v1": err(f"apiVersion is {d.get('apiVersion')!r}, want monitoring.coreos.com/v1")
if d.get("kind") != "PodMonitor": err(f"kind is {d.get('kind')!r}, want PodMonitor")
if not (d.get("metadata") or {}).get("name"): err("metadata.name is missing")
spec = d.get("spec") or {}
known_spec = {"selector", "namespaceSelector", "podMetricsEndpoints", "jobLabel", "podTargetLabels",
              "sampleLimit", "targetLimit", "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit",
              "attachMetadata", "scrapeProtocols", "scrapeClass", "bodySizeLimit", "keepDroppedTargets",
              "fallbackScrapeProtocol", "selectorMechanism", "convertClassicHistogramsToNHCB",
              "scrapeClassicHistograms", "nativeHistogramBucketLimit", "nativeHistogramMinBucketFactor"}
for k in set(spec) - known_spec: err(f"spec.{k} is not a PodMonitor field")
sel = spec.get("selector")
if not isinstance(sel, dict) or not (sel.get("matchLabels") or sel.get("matchExpressions")):
    err("spec.selector selects nothing (no matchLabels/matchExpressions)")
elif not all(isinstance(v, str) for v in (sel.get("matchLabels") or {}).values()):
    err("spec.selector.matchLabels values must be strings")
known_ep = {"port", "portNumber", "targetPort", "path", "scheme", "params", "interval", "scrapeTimeout",
            "honorLabels", "honorTimestamps", "trackTimestampsStaleness", "relabelings", "metricRelabelings",
            "filterRunning", "followRedirects", "enableHttp2", "proxyUrl", "tlsConfig", "bearerTokenSecret",
            "basicAuth", "oauth2", "authorization", "noProxy", "proxyFromEnvironment", "proxyConnectHeader"}
eps = spec.get("podMetricsEndpoints")
if not isinstance(eps, list) or not eps: err("spec.podMetricsEndpoints is empty")
for i, ep in enumerate(eps or []):
    for k in set(ep) - known_ep: err(f"podMetricsEndpoints[{i}].{k} is not a PodMetricsEndpoint field")
    if not isinstance(ep.get("port"), str): err(f"podMetricsEndpoints[{i}].port should be the container port's name")
    for k in ("interval", "scrapeTimeout"):
        if k in ep and not (isinstance(ep[k], str) and ep[k][-1:] in "smh" and ep[k][:-1].isdigit()):
            err(f"podMetricsEndpoints[{i}].{k} {ep[k]!r} is not a duration like 5s")
for e in errors: print(f"FAIL {path}: {e}")
print(f"{path}: {'FAILED' if errors else 'passed'} (structure of {d.get('kind')})")
sys.exit(1 if errors else 0)
PY

if command -v promtool >/dev/null; then
    echo "== promtool check config deploy/prometheus/prometheus.yml"
    promtool check config deploy/prometheus/prometheus.yml || fail=1
    echo "== promtool check rules: every PromQL expression of deploy/grafana/tokenscope.json"
    rules=$(mktemp --suffix=.yml)
    trap 'rm -f "${rendered:-}" "$rules"' EXIT
    # Grafana's variables sit inside label matchers' strings ("$label"): valid PromQL
    # as they are. Range variables would not be: replaced by a range.
    "$venv/bin/python" - deploy/grafana/tokenscope.json >"$rules" <<'PY'
import json, sys, yaml
d = json.load(open(sys.argv[1]))
exprs = []
def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "expr" and isinstance(x, str): exprs.append(x)
            else: walk(x)
    elif isinstance(v, list):
        for x in v: walk(x)
walk(d)
fix = lambda e: e.replace("$__rate_interval", "1m").replace("$__interval", "1m").replace("$__range", "1h")
rules = [{"record": f"tokenscope:dashboard_expr_{i}", "expr": fix(e)} for i, e in enumerate(exprs)]
print(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, sort_keys=False))
PY
    promtool check rules "$rules" || fail=1
else
    echo "== skipped: promtool checks (promtool not installed; Debian: apt-get install prometheus)"
fi

if [[ $fail != 0 ]]; then
    echo "== deploy checks FAILED"
    exit 1
fi
echo "== deploy checks passed"
