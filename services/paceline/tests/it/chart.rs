//! The Helm chart (`helm/paceline`) and the plain manifests (`k8s/`): rendered by Helm's
//! own engine and validated against the Kubernetes schemas (tests/chart/check.py), their
//! configuration read back by the code, the values schema generated from the code's
//! configuration, and the alert rules and dashboard checked by promtool and against the
//! metrics the code exports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Map, Value};
use shared::config::Role;
use shared::Config;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn promtool() -> PathBuf {
    PathBuf::from(std::env::var("PACELINE_TEST_PROMTOOL").unwrap_or_else(|_| "promtool".into()))
}

/// Configuration keys with their own chart values (connection, listeners, secrets), not
/// under `config`.
const DEDICATED: &[&str] = &[
    "listen_addr",
    "metrics_addr",
    "database_url",
    "database_max_connections",
    "redis_url",
    "nats_url",
    "admin_token",
    "secrets_key",
    "public_url",
    "network",
    "migrate_on_start",
    "netsim_url",
    "netsim_listen_addr",
];

/// The JSON Schema of a configuration key, from its default value (and its type where the
/// default is absent).
fn key_schema(key: &str, default: &Value) -> Value {
    match (key, default) {
        ("log_format", _) => json!({ "enum": ["json", "pretty"] }),
        (_, Value::Bool(_)) => json!({ "type": "boolean" }),
        (_, Value::Number(n)) if n.is_f64() => json!({ "type": "number", "minimum": 0 }),
        (_, Value::Number(_)) => json!({ "type": "integer", "minimum": 0 }),
        (_, Value::String(_)) | (_, Value::Null) => json!({ "type": "string" }),
        (_, Value::Array(_)) => json!({ "type": "array", "items": { "type": "string" } }),
        (_, Value::Object(_)) => panic!("{key}: a nested configuration value"),
    }
}

/// `config` in values.schema.json lists every configuration key the chart does not set
/// itself, with its type; together with the dedicated values, every key is reachable.
/// `PACELINE_UPDATE_CHART=1` regenerates it.
#[test]
fn the_values_schema_reaches_every_configuration_key() {
    let defaults = serde_json::to_value(Config::default()).unwrap();
    let mut props = Map::new();
    for (key, default) in defaults.as_object().unwrap() {
        if !DEDICATED.contains(&key.as_str()) {
            props.insert(key.clone(), key_schema(key, default));
        }
    }
    for key in DEDICATED {
        assert!(defaults.get(*key).is_some(), "{key} is not a configuration key");
    }
    let path = root().join("helm/paceline/values.schema.json");
    let mut schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let expected = json!({ "type": "object", "additionalProperties": false, "properties": props });
    if std::env::var("PACELINE_UPDATE_CHART").as_deref() == Ok("1") {
        schema["properties"]["config"] = expected;
        std::fs::write(&path, serde_json::to_string_pretty(&schema).unwrap() + "\n").unwrap();
        return;
    }
    assert_eq!(
        schema["properties"]["config"], expected,
        "values.schema.json's config drifted from Config: PACELINE_UPDATE_CHART=1 cargo nextest run -p paceline chart"
    );
}

/// Runs tests/chart/check.py: renders, lints, validates, refuses bad values, compares
/// k8s/. Returns its summary.
fn check_chart() -> Value {
    let script = root().join("services/paceline/tests/chart/check.py");
    let out = Command::new(harness::test_python())
        .arg(script)
        .env("CHART", root().join("helm/paceline"))
        .env("K8S", root().join("k8s"))
        .env("UPDATE", std::env::var("PACELINE_UPDATE_K8S").unwrap_or_default())
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the chart check failed:\n{stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

fn find<'a>(manifests: &'a [Value], kind: &str, name: &str) -> &'a Value {
    manifests
        .iter()
        .find(|m| m["kind"] == kind && m["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name}"))
}

/// The environment a rendered container starts with (ConfigMaps resolved; secrets given).
fn container_env(manifests: &[Value], container: &Value, secrets: &BTreeMap<&str, &str>) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for from in container["envFrom"].as_array().into_iter().flatten() {
        let name = from["configMapRef"]["name"].as_str().unwrap();
        for (k, v) in find(manifests, "ConfigMap", name)["data"].as_object().unwrap() {
            env.insert(k.clone(), v.as_str().unwrap().to_string());
        }
    }
    for e in container["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap().to_string();
        let value = match (e.get("value"), e["valueFrom"]["secretKeyRef"]["key"].as_str()) {
            (Some(v), _) => v.as_str().unwrap().to_string(),
            (None, Some(key)) => secrets.get(key).unwrap_or_else(|| panic!("no secret {key}")).to_string(),
            _ => panic!("{name}: neither a value nor a secret"),
        };
        env.insert(name, value);
    }
    env
}

/// Loads the configuration from exactly `env` (this test process's own environment).
fn load_config(env: &BTreeMap<String, String>) -> Config {
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("PACELINE_")) {
        std::env::remove_var(k);
    }
    for (k, v) in env {
        std::env::set_var(k, v);
    }
    Config::load(None).expect("the rendered environment loads")
}

#[test]
fn the_chart_renders_validates_and_runs_the_code_as_configured() {
    let summary = check_chart();
    let scenarios = &summary["scenarios"];
    let kinds = |s: &str| -> BTreeSet<String> {
        scenarios[s]["kinds"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect()
    };
    let default = kinds("default");
    for k in [
        "Deployment/paceline-api",
        "Deployment/paceline-worker",
        "Deployment/paceline-dispatcher",
        "Deployment/paceline-attendant",
        "Job/paceline-migrate",
        "Secret/paceline",
        "Secret/paceline-migrate",
        "ConfigMap/paceline-config",
        "ConfigMap/paceline-dashboard",
        "Service/paceline",
        "Service/paceline-metrics",
        "ServiceAccount/paceline",
        "PodDisruptionBudget/paceline-api",
        "PodDisruptionBudget/paceline-worker",
        "PodDisruptionBudget/paceline-dispatcher",
        "HorizontalPodAutoscaler/paceline-api",
        "HorizontalPodAutoscaler/paceline-dispatcher",
        "NetworkPolicy/paceline-api",
        "NetworkPolicy/paceline-backends",
        "NetworkPolicy/paceline-egress",
    ] {
        assert!(default.contains(k), "default install has {k}: {default:?}");
    }
    // Egress by default: DNS, the backends' ports, the release's pods, and public
    // addresses only.
    let manifests = scenarios["default"]["manifests"].as_array().unwrap();
    let egress = &find(manifests, "NetworkPolicy", "paceline-egress")["spec"];
    assert_eq!(egress["policyTypes"], json!(["Egress"]));
    assert_eq!(egress["podSelector"]["matchLabels"]["app.kubernetes.io/instance"], "paceline");
    let rules = egress["egress"].as_array().unwrap();
    let ports = |r: &Value| -> Vec<i64> {
        r["ports"].as_array().into_iter().flatten().filter_map(|p| p["port"].as_i64()).collect()
    };
    assert_eq!(ports(&rules[0]), [53, 53], "DNS");
    assert_eq!(ports(&rules[1]), [5432, 6379, 4222], "the backends");
    let public = rules.iter().find(|r| r["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0").expect("public addresses");
    let except: Vec<&str> =
        public["to"][0]["ipBlock"]["except"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    for private in ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8", "100.64.0.0/10"] {
        assert!(except.contains(&private), "{private} is not public");
    }
    assert!(rules.iter().all(|r| r.get("ports").is_some() || r["to"].is_array()), "no rule opens everything");
    // The attendant opens stored secrets; it gets no admin token.
    let attendant = &find(manifests, "Deployment", "paceline-attendant")["spec"]["template"]["spec"]["containers"][0];
    let names: Vec<&str> = attendant["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"PACELINE_SECRETS_KEY") && !names.contains(&"PACELINE_ADMIN_TOKEN"), "{names:?}");
    // No CRDs offline: no ServiceMonitor or PrometheusRule unless forced.
    assert!(!default.iter().any(|k| k.starts_with("ServiceMonitor") || k.starts_with("PrometheusRule")));
    let minimal = kinds("minimal");
    assert!(!minimal.iter().any(|k| k.starts_with("Job/")
        || k.starts_with("HorizontalPodAutoscaler/")
        || k.starts_with("PodDisruptionBudget/")
        || k.starts_with("Secret/")));
    let everything = kinds("everything");
    for k in [
        "Deployment/paceline-netsim",
        "Service/paceline-netsim",
        "Ingress/paceline",
        "NetworkPolicy/paceline-api",
        "NetworkPolicy/paceline-backends",
        "NetworkPolicy/paceline-netsim",
        "ServiceMonitor/paceline",
        "PrometheusRule/paceline",
    ] {
        assert!(everything.contains(k), "everything-on has {k}");
    }
    assert_eq!(summary["refused"].as_array().unwrap().len(), 6);

    // Each role as rendered: probes on the metrics port, grace from the shutdown times,
    // and an environment the code loads and validates for its role.
    let secrets = BTreeMap::from([
        ("admin-token", "pl_admin_0123456789abcdefghijklmnopqrstuvwxyz"),
        ("secrets-key", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="),
        ("database-url", "postgres://paceline:secret@postgres:5432/paceline"),
        ("redis-url", "redis://redis:6379"),
        ("nats-url", "nats://nats:4222"),
    ]);
    for (scenario, api_grace) in [("default", 40), ("everything", 45)] {
        let manifests = scenarios[scenario]["manifests"].as_array().unwrap();
        for (role, grace) in [("api", api_grace), ("worker", 20), ("dispatcher", 13), ("attendant", 10)] {
            let d = find(manifests, "Deployment", &format!("paceline-{role}"));
            let pod = &d["spec"]["template"]["spec"];
            assert_eq!(pod["terminationGracePeriodSeconds"], grace, "{scenario} {role}");
            assert_eq!(pod["automountServiceAccountToken"], false);
            let c = &pod["containers"][0];
            assert_eq!(c["args"], json!([role]));
            assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
            for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
                assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{role} {probe}");
            }
            let env = container_env(manifests, c, &secrets);
            let config = load_config(&env);
            let r = match role {
                "api" => Role::Api,
                "attendant" => Role::Attendant,
                "worker" => Role::Worker,
                _ => Role::Dispatcher,
            };
            config.validate(r).unwrap_or_else(|e| panic!("{scenario} {role}: {e}"));
            assert!(!config.migrate_on_start, "pods wait for the migration Job");
            assert_eq!(config.metrics_addr.port(), 9464);
            if scenario == "everything" {
                assert_eq!(config.default_min_interval_ms, 3000);
                assert_eq!(config.trusted_proxies.len(), 2);
                assert_eq!(config.pacing_jitter, 0.5);
                assert!(config.metrics_per_instance);
                assert_eq!(config.drain.as_secs(), 10);
                assert_eq!(config.public_url.as_ref().map(|u| u.as_str()), Some("https://gw.example.com/"));
                assert_eq!(config.network, shared::config::Network::Sim);
                assert_eq!(config.netsim_url.as_str(), "http://paceline-netsim:8790/");
            }
        }
        let api = find(manifests, "Deployment", "paceline-api");
        let pre_stop = &api["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"];
        assert_eq!(pre_stop, &json!(["sleep", "5"]));
    }
    // helm test calls /readyz and /v1/me.
    let test = &scenarios["default"]["tests"][0];
    let script = test["spec"]["containers"][0]["args"][0].as_str().unwrap();
    assert!(script.contains("/readyz") && script.contains("/v1/me"), "{script}");
}

/// k8s/secrets.env.example's placeholders never run a cluster: the roles refuse them at
/// start, naming the key but not the value.
#[test]
fn the_examples_placeholder_secrets_are_refused_at_start() {
    let example = std::fs::read_to_string(root().join("k8s/secrets.env.example")).unwrap();
    let get = |k: &str| example.lines().find_map(|l| l.strip_prefix(&format!("{k}="))).unwrap().to_string();
    let out = Command::new(crate::bin())
        .arg("api")
        .env_clear()
        .env("PACELINE_DATABASE_URL", "postgres://u@127.0.0.1:9/db")
        .env("PACELINE_REDIS_URL", "redis://127.0.0.1:9")
        .env("PACELINE_NATS_URL", "nats://127.0.0.1:9")
        .env("PACELINE_ADMIN_TOKEN", get("admin-token"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("admin_token is the example's placeholder"), "{stderr}");
    assert!(!stderr.contains(&get("admin-token")), "the value is not repeated");
    let config = Config {
        database_url: "postgres://u@127.0.0.1/db".into(),
        redis_url: "redis://127.0.0.1:6379".into(),
        nats_url: "nats://127.0.0.1:4222".into(),
        secrets_key: Some(get("secrets-key")),
        ..Config::default()
    };
    let e = config.validate(Role::Attendant).unwrap_err().to_string();
    assert!(e.contains("secrets_key"), "{e}");
}

/// Metric names the code exports (its string literals), with a histogram's series.
fn exported() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stack = vec![root().join("services"), root().join("shared/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.ends_with("tests") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for lit in text.split('"').skip(1).step_by(2) {
                    if lit.starts_with("paceline_") && lit.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                        names.insert(lit.to_string());
                    }
                }
            }
        }
    }
    names
}

/// `paceline_*` names in a query, without a histogram's `_bucket`, `_sum`, `_count`.
fn named(query: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in query.match_indices("paceline_") {
        if i > 0 && query.as_bytes()[i - 1].is_ascii_alphanumeric() {
            continue;
        }
        let name: String =
            query[i..].chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect();
        let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(&name);
        out.push(base.to_string());
    }
    out
}

#[test]
fn alerts_and_dashboard_query_only_exported_metrics_and_promtool_accepts_the_rules() {
    let exported = exported();
    assert!(exported.contains("paceline_queue_depth") && exported.contains("paceline_backend_up"));
    let files = root().join("helm/paceline/files");
    let rules: serde_json::Value =
        serde_json::to_value(yaml_to_json(&std::fs::read_to_string(files.join("alerts.yaml")).unwrap())).unwrap();
    let mut queries = Vec::new();
    for group in rules["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            assert!(rule["annotations"]["runbook"].as_str().is_some_and(|r| r.len() > 20), "{rule}");
            queries.push(rule["expr"].as_str().unwrap().to_string());
        }
    }
    assert!(queries.len() >= 12, "an alert for each concern of the issue");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(files.join("dashboard.json")).unwrap()).unwrap();
    let rows: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        rows,
        ["API", "Queues and pacing", "Workers and leases", "Webhooks", "Network session health", "Ban risk"]
    );
    for panel in dashboard["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            queries.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    for q in &queries {
        let names = named(q);
        assert!(!names.is_empty() || q.contains("up{"), "{q} names no paceline metric");
        for n in names {
            assert!(exported.contains(&n), "{q} names {n}, which the code does not export");
        }
    }
    let out = Command::new(promtool())
        .args(["check", "rules"])
        .arg(files.join("alerts.yaml"))
        .output()
        .expect("promtool runs (Debian's prometheus package; scripts/test installs it)");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// The rules file (YAML) as JSON, through the test venv's PyYAML.
fn yaml_to_json(text: &str) -> Value {
    let out = Command::new(harness::test_python())
        .args(["-c", "import json,sys,yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .expect("python runs");
    serde_json::from_slice(&out.stdout).expect("YAML parses")
}

/// `promtool check metrics` on live scrapes of every role: a worker process and this
/// process's API and dispatcher, after some traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_live_scrapes_of_every_role() {
    use harness::cluster::{wait_for, Cluster};
    let c = Cluster::start(crate::bin(), 1, |_| {}).await;
    // A dispatcher in this process: its metrics join the API's in this process's recorder.
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    c.phone("5511999995001", false).await;
    let (inst, token) = c.paired_instance("scraped", "5511999995001").await;
    let id = inst["id"].as_str().unwrap().to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    own.post(
        &format!("/v1/instances/{id}/messages?wait=true"),
        &json!({ "to": "5511999995001", "type": "text", "text": "x" }),
    )
    .await
    .expect(200);
    let worker = wait_for(std::time::Duration::from_secs(10), || async {
        let text = c.worker_metrics(0).await;
        text.contains("paceline_queue_sends_total").then_some(text)
    })
    .await
    .expect("the worker counted the send");
    let in_process = wait_for(std::time::Duration::from_secs(10), || async {
        let text = shared::telemetry::prometheus().render();
        text.contains("paceline_events_published_total").then_some(text)
    })
    .await
    .expect("the dispatcher published the events");
    stop.cancel();
    for (what, text) in [("worker", worker), ("api and dispatcher", in_process)] {
        let mut child = Command::new(promtool())
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool runs");
        {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "promtool on the {what} scrape:\n{report}");
    }
}

fn free_addr() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// One rendered container started as a local process.
struct Rehearsed {
    name: String,
    child: std::process::Child,
    grace: u64,
    metrics: Option<std::net::SocketAddr>,
}

impl Drop for Rehearsed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A rehearsal without a cluster: the chart rendered for `network: sim`, each container's
/// command and environment started as a local process against the test's Postgres,
/// Redis and NATS (the migration Job first, then netsim, api, two workers and the
/// dispatcher), one message sent end to end, then each pod stopped with SIGTERM and
/// checked to finish within its rendered grace, the worker handing its instance over.
///
/// What a cluster would provide is substituted: Secrets by the test's backends, Service
/// names and ports by local addresses, and the test's own schema and prefixes (the
/// shared test services are isolated per test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rehearsal_runs_the_rendered_pods_end_to_end_and_stops_them_within_their_grace() {
    use harness::cluster::wait_for;
    use std::time::{Duration, Instant};
    let summary = check_chart();
    let manifests: Vec<Value> = summary["scenarios"]["rehearsal"]["manifests"].as_array().unwrap().clone();
    let t = harness::test_config();
    let admin_token = t.admin_token.clone().unwrap();
    let secrets = BTreeMap::from([
        ("admin-token", admin_token.as_str()),
        ("secrets-key", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="),
        ("database-url", t.database_url.as_str()),
        ("redis-url", t.redis_url.as_str()),
        ("nats-url", t.nats_url.as_str()),
    ]);
    let netsim_addr = free_addr();
    let api_addr = free_addr();
    let isolation = [
        ("PACELINE_DATABASE_SCHEMA", t.database_schema.clone().unwrap()),
        ("PACELINE_KEY_PREFIX", t.key_prefix.clone()),
        ("PACELINE_SUBJECT_PREFIX", t.subject_prefix.clone()),
    ];
    // The pod's spec, run here: its args and its environment, nothing else inherited.
    let start = |name: &str, pod: &Value, listen: Option<std::net::SocketAddr>| -> Rehearsed {
        let c = &pod["containers"][0];
        let mut env = container_env(&manifests, c, &secrets);
        for (k, v) in &isolation {
            env.insert(k.to_string(), v.clone());
        }
        let metrics = env.contains_key("PACELINE_METRICS_ADDR").then(free_addr);
        if let Some(m) = metrics {
            env.insert("PACELINE_METRICS_ADDR".into(), m.to_string());
        }
        if let Some(l) = listen {
            env.insert("PACELINE_LISTEN_ADDR".into(), l.to_string());
        }
        if env.contains_key("PACELINE_NETSIM_URL") {
            env.insert("PACELINE_NETSIM_URL".into(), format!("http://{netsim_addr}"));
        }
        if env.contains_key("PACELINE_NETSIM_LISTEN_ADDR") {
            env.insert("PACELINE_NETSIM_LISTEN_ADDR".into(), netsim_addr.to_string());
        }
        let args: Vec<String> = c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
        let child = Command::new(crate::bin())
            .args(&args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(&env)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
        Rehearsed { name: name.to_string(), child, grace, metrics }
    };
    let pod_of = |kind: &str, name: &str| find(&manifests, kind, name)["spec"]["template"]["spec"].clone();

    // 1. The migration Job, to completion.
    let mut job = start("migrate", &pod_of("Job", "paceline-migrate"), None);
    let status = job.child.wait().unwrap();
    assert!(status.success(), "the migration Job failed");
    // 2. netsim, api, two workers, the dispatcher, the attendant; each ready by its startup probe's path.
    let netsim = start("netsim", &pod_of("Deployment", "paceline-netsim"), None);
    let api = start("api", &pod_of("Deployment", "paceline-api"), Some(api_addr));
    let mut workers = vec![
        start("worker-0", &pod_of("Deployment", "paceline-worker"), None),
        start("worker-1", &pod_of("Deployment", "paceline-worker"), None),
    ];
    let dispatcher = start("dispatcher", &pod_of("Deployment", "paceline-dispatcher"), None);
    let attendant = start("attendant", &pod_of("Deployment", "paceline-attendant"), None);
    for p in [&api, &workers[0], &workers[1], &dispatcher, &attendant] {
        let url = format!("http://{}/readyz", p.metrics.unwrap());
        let ready = wait_for(Duration::from_secs(60), || async {
            reqwest::get(&url).await.ok().filter(|r| r.status() == 200).map(|_| ())
        })
        .await;
        assert!(ready.is_some(), "{} never became ready", p.name);
    }
    // 3. One message end to end: pair by QR through netsim, send, see it arrive.
    let http = |token: Option<String>, base: String| harness::Client {
        http: reqwest::Client::new(),
        base,
        token,
        headers: vec![],
    };
    let admin = http(Some(admin_token.clone()), format!("http://{api_addr}"));
    let sim = http(None, format!("http://{netsim_addr}"));
    let (a, b) = ("5511999997001", "5511999997002");
    for n in [a, b] {
        sim.post("/control/phones", &json!({ "number": n })).await.expect(201);
    }
    let created = admin.post("/v1/instances", &json!({ "name": "rehearsal" })).await.expect(201);
    let id = created["instance"]["id"].as_str().unwrap().to_string();
    admin.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    let qr = wait_for(Duration::from_secs(30), || async {
        let r = admin.get(&format!("/v1/instances/{id}/qr")).await;
        (r.status == 200).then_some(r.body)
    })
    .await
    .expect("a QR code");
    sim.post("/control/scan", &json!({ "code": qr["code"], "number": a })).await.expect(200);
    let state = |admin: harness::Client, id: String| async move {
        admin.get(&format!("/v1/instances/{id}")).await.body["state"].as_str().unwrap_or_default().to_string()
    };
    let connected = wait_for(Duration::from_secs(30), || async {
        (state(admin.clone(), id.clone()).await == "connected").then_some(())
    })
    .await;
    assert!(connected.is_some(), "paired");
    let sent = admin
        .post(
            &format!("/v1/instances/{id}/messages?wait=true&timeout=60s"),
            &json!({ "to": b, "type": "text", "text": "rehearsed" }),
        )
        .await
        .expect(200);
    assert_eq!(sent["status"], "sent");
    let inbox: Value = sim.get(&format!("/control/phones/{b}/inbox")).await.expect(200);
    assert!(inbox["messages"].as_array().unwrap().iter().any(|m| m["text"] == "rehearsed"));

    // 4. SIGTERM each pod and time it against its rendered grace: first the worker that
    // holds the instance (the other must take it over within that grace), then the rest.
    let term = |p: &mut Rehearsed| -> Duration {
        let started = Instant::now();
        let ok = Command::new("kill").args(["-TERM", &p.child.id().to_string()]).status().unwrap().success();
        assert!(ok, "signal {}", p.name);
        loop {
            if let Some(status) = p.child.try_wait().unwrap() {
                assert!(status.success(), "{} exited with {status}", p.name);
                return started.elapsed();
            }
            assert!(started.elapsed() < Duration::from_secs(p.grace), "{} outlived its grace of {} s", p.name, p.grace);
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut holder = None;
    for (i, w) in workers.iter().enumerate() {
        let m = reqwest::get(format!("http://{}/metrics", w.metrics.unwrap())).await.unwrap().text().await.unwrap();
        if m.lines().any(|l| l.starts_with("paceline_worker_leases_held ") && l.ends_with(" 1")) {
            holder = Some(i);
        }
    }
    let holder = holder.expect("one worker holds the instance");
    let mut leaving = workers.remove(holder);
    let grace = Duration::from_secs(leaving.grace);
    let took = term(&mut leaving);
    let handed = wait_for(grace.saturating_sub(took), || async {
        let m =
            reqwest::get(format!("http://{}/metrics", workers[0].metrics.unwrap())).await.ok()?.text().await.ok()?;
        let holds = m.lines().any(|l| l.starts_with("paceline_worker_leases_held ") && l.ends_with(" 1"));
        (holds && state(admin.clone(), id.clone()).await == "connected").then_some(())
    })
    .await;
    assert!(handed.is_some(), "the other worker took the instance over within the grace");
    let mut rest = [attendant, dispatcher, api, workers.remove(0), netsim];
    let mut times = Vec::new();
    for p in rest.iter_mut().filter(|p| p.name != "netsim") {
        times.push((p.name.clone(), term(p).as_millis(), p.grace));
    }
    println!("rehearsal: worker handover in {} ms (grace {} s); {times:?}", took.as_millis(), grace.as_secs());
}
