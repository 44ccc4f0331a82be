//! The rendered pods run as local processes, end to end, and stopped within their grace.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{json, Value};

use super::{check_chart, container_env, find};

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
        ("PACELINE_NAMESPACE__DATABASE_SCHEMA", t.namespace.database_schema.clone().unwrap()),
        ("PACELINE_NAMESPACE__KEY_PREFIX", t.namespace.key_prefix.clone()),
        ("PACELINE_NAMESPACE__SUBJECT_PREFIX", t.namespace.subject_prefix.clone()),
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
        if env.contains_key("PACELINE_NETSIM__URL") {
            env.insert("PACELINE_NETSIM__URL".into(), format!("http://{netsim_addr}"));
        }
        if env.contains_key("PACELINE_NETSIM__LISTEN_ADDR") {
            env.insert("PACELINE_NETSIM__LISTEN_ADDR".into(), netsim_addr.to_string());
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
    // 2. netsim, api, two workers, the dispatcher, the attendant, the Chatwoot bridge; each
    // ready by its startup probe's path.
    let netsim = start("netsim", &pod_of("Deployment", "paceline-netsim"), None);
    let api = start("api", &pod_of("Deployment", "paceline-api"), Some(api_addr));
    let mut workers = vec![
        start("worker-0", &pod_of("Deployment", "paceline-worker"), None),
        start("worker-1", &pod_of("Deployment", "paceline-worker"), None),
    ];
    let dispatcher = start("dispatcher", &pod_of("Deployment", "paceline-dispatcher"), None);
    let attendant = start("attendant", &pod_of("Deployment", "paceline-attendant"), None);
    let bridge = start("chatwoot", &pod_of("Deployment", "paceline-chatwoot"), None);
    for p in [&api, &workers[0], &workers[1], &dispatcher, &attendant, &bridge] {
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
    let mut rest = [bridge, attendant, dispatcher, api, workers.remove(0), netsim];
    let mut times = Vec::new();
    for p in rest.iter_mut().filter(|p| p.name != "netsim") {
        times.push((p.name.clone(), term(p).as_millis(), p.grace));
    }
    println!("rehearsal: worker handover in {} ms (grace {} s); {times:?}", took.as_millis(), grace.as_secs());
}
