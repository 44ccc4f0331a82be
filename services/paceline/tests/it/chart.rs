//! The Helm chart (`helm/paceline`) and the plain manifests (`k8s/`): rendered by Helm's
//! own engine and validated against the Kubernetes schemas (tests/chart/check.py), their
//! configuration read back by the code, the values schema generated from the code's
//! configuration, and the alert rules and dashboard checked by promtool and against the
//! metrics the code exports.
//!
//! Here: the chart check's summary and what the tests read from the rendered manifests.
//! The tests: `config` (the values schema and the example's secrets), `render` (what
//! renders and how the code loads it), `monitoring` (alert rules, dashboard, scrapes)
//! and `rehearsal` (the rendered pods run as local processes).

mod config;
mod monitoring;
mod rehearsal;
mod render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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
