//! The deployment files, checked without a cluster: the sharded Job's shard count,
//! its hardening, the metrics port, the results paths the bench Job writes and the
//! merge Job reads, the Dockerfile's user, and the Grafana dashboard's PromQL
//! (only the metric names bench exports). `scripts/check-deploy.sh` validates the
//! manifests against the Kubernetes schemas besides.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value as Json;
use serde_norway::Value as Yaml;

/// The metric names `bench --metrics-listen` / `--prometheus-remote-write` export.
const HISTOGRAMS: &[&str] = &[
    "tokenscope_ttft_seconds",
    "tokenscope_rendered_ttft_seconds",
    "tokenscope_tpot_seconds",
    "tokenscope_itl_seconds",
    "tokenscope_e2e_seconds",
    "tokenscope_event_loop_lag_seconds",
];
const COUNTERS: &[&str] = &[
    "tokenscope_requests_total",
    "tokenscope_request_errors_total",
    "tokenscope_warmup_requests_total",
    "tokenscope_input_tokens_total",
    "tokenscope_output_tokens_total",
];
const GAUGES: &[&str] = &[
    "tokenscope_in_flight_requests",
    "tokenscope_level_load",
    "tokenscope_level_index",
];

const K8S: &str = "deploy/kubernetes";
/// The image's user (Dockerfile `USER`), which the manifests run as.
const IMAGE_UID: u64 = 65532;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let p = root().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// Every document of a YAML file.
fn yaml_docs(rel: &str) -> Vec<Yaml> {
    let text = read(rel);
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Yaml::deserialize(d).unwrap_or_else(|e| panic!("{rel} is not valid YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// The one document of `rel` whose kind is `kind`.
fn one(rel: &str, kind: &str) -> Yaml {
    let docs: Vec<Yaml> = yaml_docs(rel)
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .collect();
    assert_eq!(
        docs.len(),
        1,
        "{rel} should hold exactly one {kind}, has {}",
        docs.len()
    );
    docs.into_iter().next().unwrap()
}

fn s(v: &Yaml) -> &str {
    v.as_str().unwrap_or("")
}

fn strings(v: &Yaml) -> Vec<String> {
    v.as_sequence()
        .map(|seq| {
            seq.iter()
                .map(|x| match x {
                    Yaml::String(s) => s.clone(),
                    Yaml::Number(n) => n.to_string(),
                    other => panic!("a command/args entry that is not a string: {other:?}"),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The value after `flag` in an argument list (`--flag value` or `--flag=value`).
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let eq = format!("{name}=");
    args.iter().enumerate().find_map(|(i, a)| {
        if a == name {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(&eq)
        }
    })
}

/// Every manifest file of deploy/kubernetes.
fn manifest_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(root().join(K8S))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
        .map(|n| format!("{K8S}/{n}"))
        .collect();
    files.sort();
    files
}

/// The pod spec of a Job, a Pod or any other workload with a pod template.
fn pod_spec(doc: &Yaml) -> Option<&Yaml> {
    match s(&doc["kind"]) {
        "Pod" => Some(&doc["spec"]),
        "Job" | "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
            Some(&doc["spec"]["template"]["spec"])
        }
        "CronJob" => Some(&doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]),
        _ => None,
    }
}

fn bench_job() -> Yaml {
    one(&format!("{K8S}/job.yaml"), "Job")
}

fn merge_job() -> Yaml {
    one(&format!("{K8S}/merge-job.yaml"), "Job")
}

fn only_container(job: &Yaml, what: &str) -> Yaml {
    let cs = job["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        cs.len(),
        1,
        "the {what} Job should have one container, has {}",
        cs.len()
    );
    cs.into_iter().next().unwrap()
}

fn bench_args() -> Vec<String> {
    let c = only_container(&bench_job(), "bench");
    let mut all = strings(&c["command"]);
    all.extend(strings(&c["args"]));
    assert_eq!(
        all.first().map(String::as_str),
        Some("bench"),
        "the bench Job should run `tokenscope bench` (the image's entrypoint), runs {all:?}"
    );
    all
}

fn int(v: &Yaml) -> Option<u64> {
    v.as_u64()
}

#[test]
fn the_job_is_indexed_with_as_many_pods_as_shards() {
    let job = bench_job();
    let spec = &job["spec"];
    assert_eq!(
        s(&spec["completionMode"]),
        "Indexed",
        "the bench Job must be an Indexed Job (completionMode: Indexed): \
         JOB_COMPLETION_INDEX is each pod's shard number"
    );
    let completions = int(&spec["completions"]).expect("the bench Job sets no completions");
    let parallelism = int(&spec["parallelism"]).expect("the bench Job sets no parallelism");
    assert_eq!(
        completions, parallelism,
        "completions ({completions}) != parallelism ({parallelism}): every shard must run at once \
         to share the common start"
    );

    let args = bench_args();
    let shard = flag(&args, "--shard").expect("the bench Job passes no --shard");
    let (k, n) = shard
        .split_once('/')
        .unwrap_or_else(|| panic!("--shard {shard} is not K/N"));
    assert_eq!(
        k, "$(JOB_COMPLETION_INDEX)",
        "--shard's K should be $(JOB_COMPLETION_INDEX), is {k}"
    );
    let n: u64 = n
        .parse()
        .unwrap_or_else(|_| panic!("--shard's N ({n}) is not a number"));
    assert_eq!(
        n, completions,
        "--shard .../{n} but the Job has {completions} completions: some shards would never run, \
         or indices would exceed N"
    );
    assert!(
        flag(&args, "--start-after").is_some() || flag(&args, "--start-at").is_some(),
        "the shards need a common start (--start-after or --start-at), bench args: {args:?}"
    );
    assert_eq!(
        s(&job["spec"]["template"]["spec"]["restartPolicy"]),
        "Never",
        "a restarted shard would start after the common start: restartPolicy should be Never"
    );
}

#[test]
fn every_referenced_variable_is_defined() {
    // Kubernetes leaves an undefined `$(VAR)` in args as it is: bench would get a
    // literal "$(BENCH_URL)".
    let c = only_container(&bench_job(), "bench");
    let env = c["env"].as_sequence().cloned().unwrap_or_default();
    let defined: BTreeSet<String> = env.iter().map(|e| s(&e["name"]).to_string()).collect();
    let args = bench_args();
    let re_var = |a: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = a;
        while let Some(i) = rest.find("$(") {
            let tail = &rest[i + 2..];
            let end = tail
                .find(')')
                .unwrap_or_else(|| panic!("unclosed $( in arg {a}"));
            out.push(tail[..end].to_string());
            rest = &tail[end..];
        }
        out
    };
    for a in &args {
        for v in re_var(a) {
            assert!(
                defined.contains(&v),
                "arg {a:?} uses $({v}), which the container's env does not define"
            );
        }
    }

    let idx = env
        .iter()
        .find(|e| e["name"] == "JOB_COMPLETION_INDEX")
        .expect("JOB_COMPLETION_INDEX is not defined in the bench container's env");
    let path = s(&idx["valueFrom"]["fieldRef"]["fieldPath"]);
    assert_eq!(
        path, "metadata.annotations['batch.kubernetes.io/job-completion-index']",
        "JOB_COMPLETION_INDEX should come from the pod's completion-index annotation, comes from {path:?}"
    );

    let key = env
        .iter()
        .find(|e| e["name"] == "TOKENSCOPE_API_KEY")
        .expect("TOKENSCOPE_API_KEY (bench's API key) is not set from a Secret");
    assert!(
        key["valueFrom"]["secretKeyRef"].is_mapping(),
        "TOKENSCOPE_API_KEY should come from a secretKeyRef, not a literal value"
    );

    let cm = one(&format!("{K8S}/configmap.yaml"), "ConfigMap");
    for e in &env {
        let r = &e["valueFrom"]["configMapKeyRef"];
        if r.is_mapping() {
            assert_eq!(
                s(&r["name"]),
                s(&cm["metadata"]["name"]),
                "{} refers to ConfigMap {}, configmap.yaml defines {}",
                s(&e["name"]),
                s(&r["name"]),
                s(&cm["metadata"]["name"])
            );
            assert!(
                !cm["data"][s(&r["key"])].is_null(),
                "{} refers to key {} that configmap.yaml does not define",
                s(&e["name"]),
                s(&r["key"])
            );
        }
    }
}

#[test]
fn every_container_runs_hardened_and_non_root() {
    let mut seen = 0;
    for file in manifest_files() {
        for doc in yaml_docs(&file) {
            let Some(spec) = pod_spec(&doc) else { continue };
            let name = format!(
                "{file} ({} {})",
                s(&doc["kind"]),
                s(&doc["metadata"]["name"])
            );
            let pod_sc = &spec["securityContext"];
            if let Some(uid) = int(&pod_sc["runAsUser"]) {
                assert_ne!(uid, 0, "{name}: the pod's runAsUser is 0 (root)");
            }
            let mut containers = spec["containers"]
                .as_sequence()
                .cloned()
                .unwrap_or_default();
            containers.extend(
                spec["initContainers"]
                    .as_sequence()
                    .cloned()
                    .unwrap_or_default(),
            );
            assert!(!containers.is_empty(), "{name}: no containers");
            for c in containers {
                seen += 1;
                let cname = format!("{name}, container {}", s(&c["name"]));
                let sc = &c["securityContext"];
                let non_root = sc["runAsNonRoot"]
                    .as_bool()
                    .or(pod_sc["runAsNonRoot"].as_bool());
                assert_eq!(
                    non_root,
                    Some(true),
                    "{cname}: runAsNonRoot is not true (container or pod)"
                );
                if let Some(uid) = int(&sc["runAsUser"]) {
                    assert_ne!(uid, 0, "{cname}: runAsUser is 0 (root)");
                }
                assert_eq!(
                    sc["readOnlyRootFilesystem"].as_bool(),
                    Some(true),
                    "{cname}: readOnlyRootFilesystem is not true"
                );
                assert_eq!(
                    sc["allowPrivilegeEscalation"].as_bool(),
                    Some(false),
                    "{cname}: allowPrivilegeEscalation is not false"
                );
                let drop = strings(&sc["capabilities"]["drop"]);
                assert!(
                    drop.iter().any(|d| d == "ALL"),
                    "{cname}: capabilities.drop does not include ALL ({drop:?})"
                );
                for (what, v) in [
                    ("requests", &c["resources"]["requests"]),
                    ("limits", &c["resources"]["limits"]),
                ] {
                    assert!(
                        !v["cpu"].is_null(),
                        "{cname}: no CPU {what} (a CPU-starved client inflates latencies)"
                    );
                    assert!(!v["memory"].is_null(), "{cname}: no memory {what}");
                }
            }
        }
    }
    assert!(
        seen >= 3,
        "expected the bench, merge and results containers, found {seen}"
    );
}

#[test]
fn the_metrics_port_is_the_one_bench_listens_on() {
    let args = bench_args();
    let listen = flag(&args, "--metrics-listen").expect("the bench Job passes no --metrics-listen");
    let (host, port) = listen
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("--metrics-listen {listen} is not HOST:PORT"));
    assert!(
        host == "0.0.0.0" || host == "[::]" || host == "::",
        "--metrics-listen {listen}: listen on all interfaces, or Prometheus cannot reach the pod"
    );
    let port: u64 = port
        .parse()
        .unwrap_or_else(|_| panic!("--metrics-listen's port {port} is not a number"));

    let job = bench_job();
    let tmpl = &job["spec"]["template"];
    let ann = &tmpl["metadata"]["annotations"];
    assert_eq!(
        s(&ann["prometheus.io/scrape"]),
        "true",
        "the pod template lacks prometheus.io/scrape: \"true\""
    );
    assert_eq!(
        s(&ann["prometheus.io/port"]),
        port.to_string(),
        "annotation prometheus.io/port is {:?}, bench listens on {port}",
        s(&ann["prometheus.io/port"])
    );
    let path = s(&ann["prometheus.io/path"]);
    assert_eq!(
        path, "/metrics",
        "annotation prometheus.io/path is {path:?}, bench serves /metrics"
    );

    let c = only_container(&job, "bench");
    let ports = c["ports"].as_sequence().cloned().unwrap_or_default();
    let pm = one(&format!("{K8S}/podmonitor.yaml"), "PodMonitor");
    let eps = pm["spec"]["podMetricsEndpoints"]
        .as_sequence()
        .cloned()
        .unwrap_or_default();
    assert!(!eps.is_empty(), "the PodMonitor has no podMetricsEndpoints");
    for ep in eps {
        let want = s(&ep["port"]);
        let found = ports.iter().find(|p| s(&p["name"]) == want).unwrap_or_else(|| {
            panic!("the PodMonitor scrapes port {want:?}, the bench container has no port of that name")
        });
        assert_eq!(
            int(&found["containerPort"]),
            Some(port),
            "container port {want:?} is {:?}, bench listens on {port}",
            int(&found["containerPort"])
        );
        assert_eq!(
            s(&ep["path"]),
            "/metrics",
            "the PodMonitor scrapes {:?}, bench serves /metrics",
            s(&ep["path"])
        );
    }
    let labels = &tmpl["metadata"]["labels"];
    for (k, v) in pm["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .expect("the PodMonitor has no matchLabels")
    {
        assert_eq!(
            &labels[s(k)],
            v,
            "the PodMonitor selects {}={}, the bench pods are labelled {:?}",
            s(k),
            s(v),
            labels[s(k)]
        );
    }
}

/// `*` glob match (what `sh` does with `shard-*.json`, within one path).
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| !rest[..i].contains('/') && glob(tail, &rest[i..]))
        }
    }
}

/// Where `container` mounts `claim`.
fn mount_of(spec: &Yaml, container: &Yaml, what: &str) -> (String, String) {
    let mounts = container["volumeMounts"]
        .as_sequence()
        .cloned()
        .unwrap_or_default();
    let vols = spec["volumes"].as_sequence().cloned().unwrap_or_default();
    for m in mounts {
        let v = vols
            .iter()
            .find(|v| v["name"] == m["name"])
            .unwrap_or_else(|| panic!("{what}: mount {:?} has no volume", m["name"]));
        let claim = s(&v["persistentVolumeClaim"]["claimName"]);
        if !claim.is_empty() {
            return (claim.to_string(), s(&m["mountPath"]).to_string());
        }
    }
    panic!("{what} mounts no PersistentVolumeClaim for its results")
}

#[test]
fn the_merge_job_reads_what_the_shards_write() {
    let args = bench_args();
    let out = flag(&args, "--json")
        .expect("the bench Job passes no --json")
        .to_string();
    let raw = flag(&args, "--raw")
        .expect("the bench Job passes no --raw (merge is exact only from raw files)")
        .to_string();
    assert!(
        out.contains("$(JOB_COMPLETION_INDEX)"),
        "--out {out} is the same for every shard: they would overwrite each other"
    );
    assert_eq!(
        raw,
        format!(
            "{}.raw.jsonl",
            out.strip_suffix(".json")
                .unwrap_or_else(|| panic!("--out {out} does not end in .json"))
        ),
        "merge finds a report X.json's raw file as X.raw.jsonl beside it: --raw should be that"
    );

    let bench = bench_job();
    let bspec = &bench["spec"]["template"]["spec"];
    let (bclaim, bmount) = mount_of(bspec, &only_container(&bench, "bench"), "the bench Job");
    assert!(
        out.starts_with(&format!("{bmount}/")),
        "--out {out} is not on the results volume mounted at {bmount}"
    );

    let merge = merge_job();
    let mspec = &merge["spec"]["template"]["spec"];
    let mc = only_container(&merge, "merge");
    let (mclaim, mmount) = mount_of(mspec, &mc, "the merge Job");
    assert_eq!(
        mclaim, bclaim,
        "the merge Job mounts claim {mclaim}, the bench Job writes to {bclaim}"
    );
    assert_eq!(
        mmount, bmount,
        "the merge Job mounts the results at {mmount}, the bench Job at {bmount}"
    );

    let mut cmd = strings(&mc["command"]);
    cmd.extend(strings(&mc["args"]));
    let line = cmd.join(" ");
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "merge")
        .unwrap_or_else(|| panic!("the merge Job does not run `tokenscope merge`: {line}"));
    let inputs: Vec<&str> = words[at + 1..]
        .iter()
        .take_while(|w| !w.starts_with("--"))
        .copied()
        .collect();
    assert!(
        !inputs.is_empty(),
        "the merge Job names no shard reports: {line}"
    );
    if inputs.iter().any(|i| i.contains('*')) {
        assert!(
            cmd.len() >= 2 && cmd[0].ends_with("sh") && cmd[1] == "-c",
            "the merge Job's input {inputs:?} is a glob, which needs a shell (sh -c): runs {cmd:?}"
        );
    }
    let job_n = int(&bench["spec"]["completions"]).unwrap();
    for k in 0..job_n {
        let report = out.replace("$(JOB_COMPLETION_INDEX)", &k.to_string());
        let raw_k = raw.replace("$(JOB_COMPLETION_INDEX)", &k.to_string());
        assert!(
            inputs.iter().any(|i| glob(i, &report)),
            "the merge Job's inputs {inputs:?} miss shard {k}'s report {report}"
        );
        assert!(
            !inputs.iter().any(|i| glob(i, &raw_k)),
            "the merge Job's inputs {inputs:?} take shard {k}'s raw file {raw_k} as a report"
        );
    }
    let merged = flag(
        &words.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        "--json",
    )
    .map(str::to_string);
    let merged = merged.unwrap_or_else(|| panic!("the merge Job passes no --out: {line}"));
    assert!(
        merged.starts_with(&format!("{mmount}/")),
        "the merged report {merged} is not written to the results volume"
    );
    assert!(
        !inputs.iter().any(|i| glob(i, &merged)),
        "the merge Job's inputs {inputs:?} would take a rerun's {merged} as a shard"
    );

    let pvc = one(&format!("{K8S}/pvc.yaml"), "PersistentVolumeClaim");
    assert_eq!(
        s(&pvc["metadata"]["name"]),
        bclaim,
        "pvc.yaml defines {}, the Jobs mount {bclaim}",
        s(&pvc["metadata"]["name"])
    );
    assert!(
        strings(&pvc["spec"]["accessModes"])
            .iter()
            .any(|m| m == "ReadWriteMany"),
        "the results PVC must be ReadWriteMany: the shards write from several nodes at once"
    );
}

#[test]
fn the_kustomization_lists_existing_files_and_not_the_merge() {
    let k = one(&format!("{K8S}/kustomization.yaml"), "Kustomization");
    let res = strings(&k["resources"]);
    for r in &res {
        assert!(
            root().join(K8S).join(r).exists(),
            "kustomization.yaml lists {r}, which does not exist"
        );
    }
    for need in ["job.yaml", "pvc.yaml", "configmap.yaml"] {
        assert!(
            res.iter().any(|r| r == need),
            "kustomization.yaml does not list {need}"
        );
    }
    assert!(
        !res.iter().any(|r| r == "merge-job.yaml"),
        "kustomization.yaml lists merge-job.yaml: it would run with the shards, before they wrote anything"
    );
}

#[test]
fn the_image_runs_as_a_numeric_non_root_user() {
    let text = read("Dockerfile");
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let last_from = lines
        .iter()
        .rposition(|l| l.to_ascii_uppercase().starts_with("FROM "))
        .expect("the Dockerfile has no FROM");
    let stage = &lines[last_from..];
    let directive = |d: &'static str| {
        stage
            .iter()
            .filter(move |l| l.to_ascii_uppercase().starts_with(&format!("{d} ")))
    };
    let user = directive("USER").next_back().unwrap_or_else(|| {
        panic!(
            "the Dockerfile's final stage ({}) sets no USER: it would run as root",
            lines[last_from]
        )
    });
    let spec = user[5..].trim();
    let uid = spec.split(':').next().unwrap();
    let uid: u64 = uid.parse().unwrap_or_else(|_| {
        panic!("USER {spec}: use a numeric UID, or Kubernetes' runAsNonRoot cannot verify it is not root")
    });
    assert_ne!(uid, 0, "the final stage's USER is 0 (root)");
    assert_eq!(
        uid, IMAGE_UID,
        "the image runs as {uid}, the manifests as {IMAGE_UID}"
    );
    let entry = directive("ENTRYPOINT")
        .next_back()
        .expect("the final stage has no ENTRYPOINT");
    assert!(
        entry.contains("[\"tokenscope\"]"),
        "the ENTRYPOINT should be [\"tokenscope\"], is {entry}"
    );
    assert!(
        text.contains("cargo build --release --locked") && text.contains("--bin tokenscope"),
        "the builder should run `cargo build --release --locked ... --bin tokenscope`"
    );

    for file in manifest_files() {
        for doc in yaml_docs(&file) {
            if let Some(uid) = pod_spec(&doc).and_then(|p| int(&p["securityContext"]["runAsUser"]))
            {
                assert_eq!(
                    uid, IMAGE_UID,
                    "{file}: runAsUser {uid}, the image's user is {IMAGE_UID}"
                );
            }
        }
    }
}

/// Every PromQL expression of the dashboard: panel targets and query variables.
fn promql(v: &Json, out: &mut Vec<String>) {
    match v {
        Json::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr" | "definition", Json::String(e)) => out.push(e.clone()),
                    ("query", Json::String(e)) if e.contains("tokenscope_") => out.push(e.clone()),
                    _ => promql(x, out),
                }
            }
        }
        Json::Array(a) => a.iter().for_each(|x| promql(x, out)),
        _ => {}
    }
}

fn metric_names(expr: &str) -> Vec<String> {
    // `tokenscope_[a-z0-9_]+`: with digits, or tokenscope_e2e_seconds reads as tokenscope_e.
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = expr[i..].find("tokenscope_") {
        let start = i + at;
        let boundary =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        let mut end = start + "tokenscope_".len();
        while end < b.len()
            && (b[end].is_ascii_lowercase() || b[end].is_ascii_digit() || b[end] == b'_')
        {
            end += 1;
        }
        if boundary {
            out.push(expr[start..end].to_string());
        }
        i = end;
    }
    out
}

#[test]
fn the_dashboard_queries_only_the_exported_metrics() {
    let path = "deploy/grafana/tokenscope.json";
    let d: Json =
        serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
    let mut exprs = Vec::new();
    promql(&d, &mut exprs);
    assert!(
        exprs.len() >= 10,
        "{path}: found only {} PromQL expressions",
        exprs.len()
    );

    let mut used = BTreeSet::new();
    for e in &exprs {
        let names = metric_names(e);
        assert!(
            !names.is_empty(),
            "{path}: expression queries no tokenscope metric: {e}"
        );
        for n in names {
            let (base, suffix) = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| {
                    n.strip_suffix(s)
                        .filter(|b| HISTOGRAMS.contains(b))
                        .map(|b| (b.to_string(), *s))
                })
                .unwrap_or((n.clone(), ""));
            let known = HISTOGRAMS.contains(&base.as_str())
                || COUNTERS.contains(&base.as_str())
                || GAUGES.contains(&base.as_str());
            assert!(
                known,
                "{path}: {n} is not a metric bench exports (expression: {e})"
            );
            if HISTOGRAMS.contains(&base.as_str()) {
                assert!(
                    !suffix.is_empty(),
                    "{path}: histogram {base} queried without _bucket/_sum/_count: {e}"
                );
            }
            if suffix == "_bucket" {
                assert!(
                    e.contains("histogram_quantile") && e.contains("le"),
                    "{path}: {n} outside histogram_quantile(... by (le ...)): {e}"
                );
            }
            if COUNTERS.contains(&base.as_str()) && !e.starts_with("label_values") {
                assert!(
                    e.contains("rate(") || e.contains("increase("),
                    "{path}: counter {n} used without rate()/increase(): {e}"
                );
            }
            used.insert(base);
        }
    }
    for need in [
        "tokenscope_ttft_seconds",
        "tokenscope_itl_seconds",
        "tokenscope_tpot_seconds",
        "tokenscope_e2e_seconds",
        "tokenscope_output_tokens_total",
        "tokenscope_requests_total",
        "tokenscope_request_errors_total",
        "tokenscope_in_flight_requests",
        "tokenscope_level_load",
        "tokenscope_event_loop_lag_seconds",
    ] {
        assert!(used.contains(need), "{path}: no panel queries {need}");
    }

    let vars: BTreeSet<&str> = d["templating"]["list"]
        .as_array()
        .expect("the dashboard has no template variables")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for v in ["label", "level"] {
        assert!(
            vars.contains(v),
            "{path}: no template variable {v:?} (has {vars:?})"
        );
    }
    // Panels name their data source through a variable or an import input, never a
    // fixed uid of someone's Grafana.
    let mut uids = Vec::new();
    fn ds_uids(v: &Json, out: &mut Vec<String>) {
        match v {
            Json::Object(m) => {
                if let Some(Json::Object(ds)) = m.get("datasource")
                    && ds.get("type").and_then(Json::as_str) == Some("prometheus")
                {
                    let uid = ds.get("uid").and_then(Json::as_str).unwrap_or("");
                    out.push(uid.to_string());
                }
                m.values().for_each(|x| ds_uids(x, out));
            }
            Json::Array(a) => a.iter().for_each(|x| ds_uids(x, out)),
            _ => {}
        }
    }
    ds_uids(&d, &mut uids);
    for u in uids {
        assert!(
            u.starts_with("${"),
            "{path}: a Prometheus data source with the fixed uid {u:?}: use ${{datasource}}"
        );
    }
}

#[test]
fn the_example_prometheus_scrapes_the_default_metrics_port() {
    let port = flag(&bench_args(), "--metrics-listen")
        .and_then(|l| l.rsplit_once(':'))
        .map(|(_, p)| p.to_string())
        .unwrap();
    let cfg = yaml_docs("deploy/prometheus/prometheus.yml")
        .into_iter()
        .next()
        .expect("prometheus.yml is empty");
    let targets: Vec<String> = cfg["scrape_configs"]
        .as_sequence()
        .expect("prometheus.yml has no scrape_configs")
        .iter()
        .flat_map(|sc| {
            sc["static_configs"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|st| strings(&st["targets"]))
        .collect();
    assert!(
        targets.iter().any(|t| t.ends_with(&format!(":{port}"))),
        "prometheus.yml scrapes {targets:?}, none on bench's metrics port {port}"
    );
}

#[test]
fn the_glob_helper_matches_like_sh() {
    assert!(glob("/results/shard-*.json", "/results/shard-3.json"));
    assert!(!glob("/results/shard-*.json", "/results/shard-3.raw.jsonl"));
    assert!(glob("/results/shard-*.json", "/results/shard-3.raw.json"));
    assert!(!glob("/results/*.json", "/results/sub/x.json"));
    assert!(Path::new(K8S).is_relative());
    assert_eq!(
        metric_names("rate(tokenscope_e2e_seconds_bucket[1m]) + xtokenscope_y"),
        vec!["tokenscope_e2e_seconds_bucket"]
    );
}
