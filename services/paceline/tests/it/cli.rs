//! The `paceline` binary as an operator runs it: config errors, `dev`, and SIGTERM.

use std::process::{Command, Stdio};
use std::time::Duration;

use harness::cluster::wait_for;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_paceline"));
    // Start from a clean slate: only what each test sets.
    for (k, _) in std::env::vars() {
        if k.starts_with("PACELINE_") {
            c.env_remove(k);
        }
    }
    c
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn bad_config_names_each_value_and_hides_secrets() {
    let out = bin()
        .arg("api")
        .env("PACELINE_DATABASE_URL", "mysql://root:hunter2@db/x")
        .env("PACELINE_ADMIN_TOKEN", "pl_admin_tooshort")
        .env("PACELINE_LOG__FORMAT", "pretty")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for needle in ["database_url", "redis_url", "nats_url", "admin_token"] {
        assert!(err.contains(needle), "{needle} not named in: {err}");
    }
    assert!(!err.contains("hunter2") && !err.contains("pl_admin_tooshort"), "{err}");

    let out = bin().arg("api").env("PACELINE_LISTEN_ADDR", "not-an-address").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).to_lowercase().contains("listen_addr"));
}

#[test]
fn openapi_subcommand_prints_the_committed_description() {
    let out = bin().arg("openapi").output().unwrap();
    assert!(out.status.success());
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../api/openapi.json")).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), committed);
}

#[tokio::test]
async fn dev_serves_the_api_netsim_and_metrics_then_stops_on_sigterm() {
    let cfg = harness::test_config();
    let (api, metrics, netsim, console) = (free_port(), free_port(), free_port(), free_port());
    let admin = cfg.admin_token.clone().unwrap();
    let mut child = bin()
        .args(["dev", "--network", "sim"])
        .env("PACELINE_DATABASE_URL", &cfg.database_url)
        .env("PACELINE_NAMESPACE__DATABASE_SCHEMA", cfg.namespace.database_schema.as_ref().unwrap())
        .env("PACELINE_REDIS_URL", &cfg.redis_url)
        .env("PACELINE_NATS_URL", &cfg.nats_url)
        .env("PACELINE_NAMESPACE__KEY_PREFIX", &cfg.namespace.key_prefix)
        .env("PACELINE_NAMESPACE__SUBJECT_PREFIX", &cfg.namespace.subject_prefix)
        .env("PACELINE_ADMIN_TOKEN", &admin)
        .env("PACELINE_LISTEN_ADDR", format!("127.0.0.1:{api}"))
        .env("PACELINE_METRICS_ADDR", format!("127.0.0.1:{metrics}"))
        .env("PACELINE_NETSIM__LISTEN_ADDR", format!("127.0.0.1:{netsim}"))
        .env("PACELINE_CONSOLE__LISTEN_ADDR", format!("127.0.0.1:{console}"))
        .env("PACELINE_API__DRAIN_MS", "200")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let http = reqwest::Client::new();
    // Wait for start-up (bounded): this polls a process, it asserts no timing.
    let mut up = false;
    for _ in 0..300 {
        if http.get(format!("http://127.0.0.1:{api}/readyz")).send().await.is_ok_and(|r| r.status() == 200) {
            up = true;
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("paceline dev exited early with {status}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "paceline dev did not become ready");

    let me = http.get(format!("http://127.0.0.1:{api}/v1/me")).bearer_auth(&admin).send().await.unwrap();
    assert_eq!(me.status(), 200);
    let created = http
        .post(format!("http://127.0.0.1:{api}/v1/instances"))
        .bearer_auth(&admin)
        .json(&serde_json::json!({ "name": "from-cli" }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let body: serde_json::Value = created.json().await.unwrap();
    assert!(body["token"].as_str().unwrap().starts_with("pl_inst_"));
    let ns = http.get(format!("http://127.0.0.1:{netsim}/healthz")).send().await.unwrap();
    assert_eq!(ns.status(), 200);
    // The node's console signs in against the node's API.
    let signin = http.get(format!("http://127.0.0.1:{console}/")).send().await.unwrap();
    assert_eq!(signin.status(), 200);
    assert!(signin.text().await.unwrap().contains("name=\"token\""));
    let m = http.get(format!("http://127.0.0.1:{metrics}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(m.contains("paceline_http_requests_total"), "{m}");
    // The probes on the metrics listener: every role of the node started.
    let ready = wait_for(Duration::from_secs(10), || async {
        let r = http.get(format!("http://127.0.0.1:{metrics}/readyz")).send().await.ok()?;
        (r.status() == 200).then_some(())
    })
    .await;
    assert!(ready.is_some(), "api, worker and dispatcher report ready on the metrics listener");

    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(logs.contains("\"api stopped\"") || logs.contains("api stopped"), "{logs}");
    assert!(!logs.contains(&admin), "the admin token never reaches the logs");
    assert!(
        logs.lines().filter(|l| !l.trim().is_empty()).all(|l| l.trim_start().starts_with('{')),
        "JSON logs: {logs}"
    );
}
