//! The alert rules and the dashboard: they query only metrics the code exports, and
//! promtool accepts the rules and every role's live scrape.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

use super::root;

fn promtool() -> PathBuf {
    PathBuf::from(std::env::var("PACELINE_TEST_PROMTOOL").unwrap_or_else(|_| "promtool".into()))
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
    let id = inst.id.to_string();
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
