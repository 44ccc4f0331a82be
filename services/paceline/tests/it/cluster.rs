//! Multi-pod scenarios: netsim and the API in this process, two or more real worker
//! processes. Pairing, logout and ban, RPC errors, call rejection, and failover by
//! SIGKILL, SIGTERM and SIGSTOP with the takeover times printed.

use crate::bin;
use std::time::{Duration, Instant};

use harness::cluster::{wait_for, Cluster};
use serde_json::json;

const A: &str = "5511999990001";
const B: &str = "5511999990002";
const C: &str = "5511999990003";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_by_qr_and_by_code() {
    let c = Cluster::start(bin(), 2, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, true).await;
    let admin = c.api.admin();

    // By QR.
    let (inst, _) = c.paired_instance("by-qr", A).await;
    assert_eq!((inst.phone.as_deref(), inst.account_type.as_deref()), (Some(A), Some("personal")));
    let id = inst.id.as_str();
    let msg = admin.get(&format!("/v1/instances/{id}/qr")).await.expect_error(409, "instance_not_pairing");
    assert!(!msg.contains(A));
    let r = admin.post(&format!("/v1/instances/{id}/pairing-code"), &json!({ "phone": B })).await;
    assert_eq!(r.body["error"]["retryable"], false);
    r.expect_error(409, "instance_not_pairing");

    // By code.
    let (inst, token) = c.api.create_instance("by-code").await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    own.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    let qr = wait_for(Duration::from_secs(20), || async {
        let r = own.get(&format!("/v1/instances/{id}/qr")).await;
        (r.status == 200).then_some(r.body)
    })
    .await
    .unwrap();
    assert!(qr["base64"].as_str().unwrap().starts_with("data:image/png;base64,"));
    assert!(qr["expires_at"].is_string());
    own.post(&format!("/v1/instances/{id}/pairing-code"), &json!({ "phone": "5511999990404" }))
        .await
        .expect_error(400, "invalid_number");
    own.post(&format!("/v1/instances/{id}/pairing-code"), &json!({ "phone": "12" }))
        .await
        .expect_error(400, "validation_failed");
    let code =
        own.post(&format!("/v1/instances/{id}/pairing-code"), &json!({ "phone": format!("+{B}") })).await.expect(200);
    let code = code["pairing_code"].as_str().unwrap().to_string();
    assert_eq!(code.len(), 8);
    c.netsim().post("/control/enter-code", &json!({ "number": B, "pairing_code": code })).await.expect(200);
    let inst = c.wait_state(&id, "connected", Duration::from_secs(20)).await;
    assert_eq!((inst.phone.as_deref(), inst.account_type.as_deref()), (Some(B), Some("business")));

    // Connect is idempotent: a linked instance stays linked, no new pairing.
    own.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    let info = c.netsim().get(&format!("/control/phones/{B}")).await.expect(200);
    assert_eq!(info["linked_devices"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_and_ban_are_reported() {
    let c = Cluster::start(bin(), 2, |_| {}).await;
    for n in [A, B, C] {
        c.phone(n, false).await;
    }
    let admin = c.api.admin();

    // Logged out from the phone.
    let (inst, _) = c.paired_instance("lo", A).await;
    let id = inst.id.to_string();
    c.netsim().post(&format!("/control/phones/{A}/logout"), &json!({})).await.expect(200);
    c.wait_state(&id, "logged_out", Duration::from_secs(10)).await;
    let r = admin.post(&format!("/v1/instances/{id}/logout"), &json!({})).await;
    assert_eq!(r.body["error"]["retryable"], false, "{}", r.text);
    r.expect_error(409, "instance_not_connected");
    // Connecting again means pairing again.
    admin.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    c.wait_state(&id, "qr_pending", Duration::from_secs(10)).await;

    // Banned.
    let (inst, _) = c.paired_instance("ban", B).await;
    let id = inst.id.to_string();
    c.netsim().post(&format!("/control/phones/{B}/ban"), &json!({})).await.expect(200);
    c.wait_state(&id, "banned", Duration::from_secs(10)).await;
    admin.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect_error(409, "instance_banned");
    admin
        .post(&format!("/v1/instances/{id}/pairing-code"), &json!({ "phone": B }))
        .await
        .expect_error(409, "instance_banned");

    // Logged out through the API.
    let (inst, _) = c.paired_instance("api-lo", C).await;
    let id = inst.id.to_string();
    let out = admin.post(&format!("/v1/instances/{id}/logout"), &json!({})).await.expect(200);
    assert_eq!(out["state"], "logged_out");
    let info = c.netsim().get(&format!("/control/phones/{C}")).await.expect(200);
    assert_eq!(info["linked_devices"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_errors_map_to_not_connected_and_timeout() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.api.rpc_timeout = Duration::from_millis(1_000)).await;
    c.phone(A, false).await;
    let (inst, _) = c.api.create_instance("rpc").await;
    let id = inst.id.to_string();
    let admin = c.api.admin();
    // Nobody runs it, so it is not in qr_pending: 409, retryable (connecting makes a
    // retry succeed).
    let r = admin.post(&format!("/v1/instances/{id}/pairing-code"), &json!({ "phone": A })).await;
    assert_eq!(r.body["error"]["retryable"], true, "{}", r.text);
    r.expect_error(409, "instance_not_pairing");
    // The worker asks a slow network: the API gives up with 504.
    admin.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    c.wait_state(&id, "qr_pending", Duration::from_secs(10)).await;
    c.netsim().post("/control/faults", &json!({ "latency_ms": 3000 })).await.expect(200);
    admin
        .post(&format!("/v1/instances/{id}/pairing-code"), &json!({ "phone": A }))
        .await
        .expect_error(504, "worker_timeout");
    c.netsim().post("/control/faults", &json!({ "latency_ms": 0 })).await.expect(200);

    // A dropped connection is reopened by the same owner, resuming the linked session.
    c.netsim()
        .post(
            "/control/scan",
            &json!({ "code": admin.get(&format!("/v1/instances/{id}/qr")).await.expect(200)["code"], "number": A }),
        )
        .await
        .expect(200);
    c.wait_state(&id, "connected", Duration::from_secs(10)).await;
    let (epoch, _, _) = c.ownership(&id).await;
    c.netsim().post("/control/faults", &json!({ "drop_connections": true })).await.expect(200);
    wait_for(Duration::from_secs(10), || async {
        let info = c.netsim().get(&format!("/control/phones/{A}")).await.body;
        (info["online_devices"] == 1).then_some(())
    })
    .await
    .expect("the session comes back");
    c.wait_state(&id, "connected", Duration::from_secs(10)).await;
    assert_eq!(c.ownership(&id).await.0, epoch, "same owner, no takeover");
    assert_eq!(c.netsim().get(&format!("/control/phones/{A}")).await.body["linked_devices"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_rejected_per_settings_and_action_connect_works() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(C, false).await;
    // The action route pairs too: QR and a pairing code for the number asked.
    let (inst, token) = c.api.create_instance("acts").await;
    let id = inst.id.to_string();
    let key = c.api.anon().with_header("x-api-key", &token);
    let out = key.get(&format!("/instance/connect/acts?number={A}")).await.expect(200);
    assert!(out["code"].as_str().unwrap().starts_with("2@"), "{out}");
    assert!(out["base64"].as_str().unwrap().starts_with("data:image/png;base64,"));
    let pairing = out["pairingCode"].as_str().unwrap().to_string();
    key.get("/instance/connect/nope").await.expect_error(404, "instance_not_found");
    c.netsim().post("/control/enter-code", &json!({ "number": A, "pairing_code": pairing })).await.expect(200);
    c.wait_state(&id, "connected", Duration::from_secs(10)).await;
    let out = key.get("/instance/connect/acts").await.expect(200);
    assert_eq!(out["state"], "connected");
    assert!(out["pairingCode"].is_null());

    // Calls: rejected with a message once the setting is on.
    let s = key
        .send(
            key.request(reqwest::Method::PATCH, "/instance/settings/acts")
                .json(&json!({ "reject_call": true, "msg_call": "busy, text me" })),
        )
        .await
        .expect(200);
    assert_eq!(s, json!({ "reject_call": true, "msg_call": "busy, text me" }));
    let call = c.netsim().post(&format!("/control/phones/{C}/call"), &json!({ "to": A })).await.expect(201);
    let call_id = call["id"].as_str().unwrap().to_string();
    let rejected = wait_for(Duration::from_secs(10), || async {
        let calls = c.netsim().get("/control/calls").await.body;
        calls["calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["id"] == call_id.as_str() && k["state"] == "rejected")
            .cloned()
    })
    .await
    .expect("the call is rejected");
    assert_eq!(rejected["message"], "busy, text me");
    let inbox = c.netsim().get(&format!("/control/phones/{C}/inbox")).await.expect(200);
    assert_eq!(inbox["messages"][0]["text"], "busy, text me");
}

/// Pairs an instance on a two-worker cluster and returns (cluster, id, owner index).
async fn owned(name: &str) -> (Cluster, String, usize) {
    let c = Cluster::start(bin(), 2, |_| {}).await;
    c.phone(A, false).await;
    let (inst, _) = c.paired_instance(name, A).await;
    let id = inst.id.to_string();
    let owner = wait_for(Duration::from_secs(5), || c.owner()).await.expect("an owner reports its lease");
    (c, id, owner)
}

/// Waits until another worker owns the instance (epoch moved on) and it is connected.
async fn wait_takeover(c: &Cluster, id: &str, epoch: i64, within: Duration) -> Duration {
    let start = Instant::now();
    wait_for(within, || async {
        let (e, state, _) = c.ownership(id).await;
        (e > epoch && state == "connected").then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("no takeover of {id} within {within:?}"));
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_moves_instances_within_the_lease_ttl() {
    let (c, id, owner) = owned("kill").await;
    let (epoch, _, _) = c.ownership(&id).await;
    c.signal(owner, "KILL");
    let ttl = c.config.worker.lease_ttl;
    let took = wait_takeover(&c, &id, epoch, ttl * 3).await;
    println!("takeover after SIGKILL: {} ms (lease TTL {} ms)", took.as_millis(), ttl.as_millis());
    assert!(took <= ttl + Duration::from_millis(1_500), "takeover took {took:?}");
    // Resumed from the stored session: no second pairing.
    let info = c.netsim().get(&format!("/control/phones/{A}")).await.expect(200);
    assert_eq!(info["linked_devices"], 1);
    assert_eq!(info["online_devices"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_off_before_the_lease_expires() {
    let (mut c, id, owner) = owned("term").await;
    let (epoch, _, _) = c.ownership(&id).await;
    c.signal(owner, "TERM");
    let ttl = c.config.worker.lease_ttl;
    let took = wait_takeover(&c, &id, epoch, ttl * 3).await;
    println!("takeover after SIGTERM: {} ms (lease TTL {} ms)", took.as_millis(), ttl.as_millis());
    assert!(took < ttl, "a graceful handoff beats lease expiry, took {took:?}");
    let status = c.workers[owner].child.wait().unwrap();
    assert!(status.success(), "the stopped worker exits cleanly: {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_ex_owner_writes_nothing() {
    let (c, id, owner) = owned("pause").await;
    let (epoch, _, _) = c.ownership(&id).await;
    c.signal(owner, "STOP");
    let ttl = c.config.worker.lease_ttl;
    let took = wait_takeover(&c, &id, epoch, ttl * 3).await;
    println!("takeover of a paused owner: {} ms", took.as_millis());
    let before = c.ownership(&id).await;
    c.signal(owner, "CONT");
    // The ex-owner wakes up, finds its lease gone or its session replaced, and stops.
    let released = wait_for(Duration::from_secs(10), || async {
        let m = c.worker_metrics(owner).await;
        let held = m
            .lines()
            .find(|l| l.starts_with("paceline_worker_leases_held"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        (held == Some(0.0)).then_some(())
    })
    .await;
    assert!(released.is_some(), "the ex-owner lets go");
    // The sentinel: its lease renewal has run and found the lease another worker's, or
    // (its first renewal timing out on the clock that ran while it was stopped) no renewal
    // for a whole TTL; either way it counts the loss, so whatever it would still try, it
    // has tried.
    let noticed = wait_for(Duration::from_secs(10), || async {
        (c.worker_metric(owner, "paceline_worker_lease_lost_total", "").await >= 1.0).then_some(())
    })
    .await;
    assert!(noticed.is_some(), "the ex-owner's renewal found its lease gone");
    let after = c.ownership(&id).await;
    assert_eq!(before, after, "the ex-owner wrote nothing after the takeover");
    let refused = c.worker_metric(owner, "paceline_worker_fenced_writes_total", "rejected").await;
    println!("ex-owner fenced writes refused: {}", refused as u64);
    assert_eq!(after.1, "connected");
    let info = c.netsim().get(&format!("/control/phones/{A}")).await.expect(200);
    assert_eq!(info["online_devices"], 1, "one live session");
}

/// An instance on the whatsapp network in a sim deployment (chosen per instance), with
/// WhatsApp unreachable (here: a WebSocket address that refuses): the worker keeps the
/// instance `connecting`, retries with backoff and stays healthy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_whatsapp_network_leaves_the_instance_connecting() {
    let mut c = Cluster::start(bin(), 0, |_| {}).await;
    let mut cmd = harness::cluster::command(bin(), "worker", &c.config);
    cmd.env("PACELINE_WHATSAPP__WS_URL", "ws://127.0.0.1:9/ws/chat")
        .env("PACELINE_WHATSAPP__CONNECT_TIMEOUT_MS", "500");
    let metrics = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    cmd.env("PACELINE_METRICS_ADDR", metrics.to_string());
    c.workers.push(harness::cluster::WorkerProc { child: cmd.spawn().unwrap(), metrics });
    let admin = c.api.admin();
    admin
        .post("/v1/instances", &json!({ "name": "wa-bad", "network": "telegram" }))
        .await
        .expect_error(400, "validation_failed");
    let created = admin.post("/v1/instances", &json!({ "name": "wa-down", "network": "whatsapp" })).await.expect(201);
    assert_eq!(created["instance"]["network"], "whatsapp");
    let id = created["instance"]["id"].as_str().unwrap().to_string();
    admin.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    c.wait_state(&id, "connecting", Duration::from_secs(20)).await;
    // Several attempts later (the sentinel: two failed openings counted): still
    // connecting, no QR, the worker alive and holding it.
    wait_for(Duration::from_secs(30), || async {
        let failed = c.worker_metric(0, "paceline_worker_session_events_total", "kind=\"open_failed\"").await;
        (failed >= 2.0).then_some(())
    })
    .await
    .expect("the worker tries to open the session again and again");
    assert_eq!(admin.get(&format!("/v1/instances/{id}")).await.expect(200)["state"], "connecting");
    admin.get(&format!("/v1/instances/{id}/qr")).await.expect_error(409, "instance_not_pairing");
    // Requests for the session are answered at once while it opens or waits to retry
    // (not left to the RPC timeout's 504).
    let r = admin.get(&format!("/v1/instances/{id}/contacts")).await;
    assert_eq!(r.body["error"]["retryable"], true, "{}", r.text);
    r.expect_error(409, "instance_not_connected");
    admin
        .post(&format!("/v1/instances/{id}/pairing-code"), &json!({ "phone": "5511999990001" }))
        .await
        .expect_error(409, "instance_not_pairing");
    assert_eq!(c.worker_metric(0, "paceline_worker_leases_held", "").await, 1.0);
    let pool = c.pool().await;
    let (device,): (i64,) = sqlx::query_as("SELECT count(*) FROM wa_store WHERE instance_id = $1 AND kind = 'device'")
        .bind(&id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(device, 1, "the session's device lives in Postgres");
}

/// A temporary ban is visible (disconnected, with why and until when) and the worker
/// waits it out before connecting again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_temporary_ban_is_visible_and_waited_out() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone("5511977770001", false).await;
    let (inst, _) = c.paired_instance("tempban", "5511977770001").await;
    let id = inst.id.to_string();
    c.netsim().post("/control/phones/5511977770001/tempban", &json!({ "seconds": 8 })).await.expect(200);
    let paused = c.wait_state(&id, "disconnected", Duration::from_secs(10)).await;
    assert!(paused.state_reason.as_deref().unwrap().starts_with("temporarily banned until "), "{paused:?}");
    // Not before the ban ends: still paused a second later (the ban is long enough for a
    // slow machine to see `disconnected` well before it ends).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(c.api.admin().get(&format!("/v1/instances/{id}")).await.expect(200)["state"], "disconnected");
    let back = c.wait_state(&id, "connected", Duration::from_secs(20)).await;
    assert!(back.state_reason.is_none(), "cleared by the next state change: {back:?}");
    let pool = c.pool().await;
    let reasons: Vec<serde_json::Value> = sqlx::query_scalar(
        "SELECT payload->'data'->'reason' FROM outbox WHERE instance_id = $1 AND type = 'instance.state' AND payload->'data' ? 'reason'",
    )
    .bind(&id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(reasons.len(), 1);
}

/// A lease that expired because a renewal came late, while nobody else took it, is taken
/// again under the same epoch: the session carries on, nothing moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_renewal_keeps_a_lease_nobody_took() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    let (inst, _) = c.paired_instance("late-renewal", A).await;
    let id = inst.id.to_string();
    let (epoch, state, _) = c.ownership(&id).await;
    assert_eq!(state, "connected");
    let redis = shared::kv::connect(&c.config).unwrap();
    let key = shared::kv::Keys::new(&c.config).lease(&shared::ids::InstanceId::parse(&id).unwrap());
    let mut conn = redis.get().await.unwrap();
    let holder: Option<String> = deadpool_redis::redis::cmd("GET").arg(&key).query_async(&mut conn).await.unwrap();
    let holder = holder.expect("the worker holds the lease");
    // The lease lapses (as when a renewal is late) and nobody takes it meanwhile.
    let _: i64 = deadpool_redis::redis::cmd("DEL").arg(&key).query_async(&mut conn).await.unwrap();
    let back = wait_for(c.config.worker.lease_ttl * 2, || {
        let (redis, key) = (redis.clone(), key.clone());
        async move {
            let mut conn = redis.get().await.unwrap();
            let now: Option<String> = deadpool_redis::redis::cmd("GET").arg(&key).query_async(&mut conn).await.unwrap();
            now
        }
    })
    .await;
    assert_eq!(back.as_deref(), Some(holder.as_str()), "the same worker took its lease again");
    let revived = wait_for(Duration::from_secs(5), || async {
        let n = c.worker_metric(0, "paceline_worker_lease_revived_total", "").await;
        (n >= 1.0).then_some(n)
    })
    .await;
    assert_eq!(revived, Some(1.0), "counted as revived");
    assert_eq!(c.worker_metric(0, "paceline_worker_lease_lost_total", "").await, 0.0, "not lost");
    // Nothing moved: same epoch, still connected.
    let (after, state, _) = c.ownership(&id).await;
    assert_eq!((after, state.as_str()), (epoch, "connected"));
}

/// The worker's operational gauges: instances that should run and nobody holds (here one
/// over the worker's capacity), and each backend reachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_report_unleased_instances_and_their_backends() {
    let c = Cluster::start(bin(), 1, |cfg| cfg.worker.max_instances = 1).await;
    let admin = c.api.admin();
    for name in ["held", "stranded"] {
        let created = admin.post("/v1/instances", &json!({ "name": name })).await.expect(201);
        let id = created["instance"]["id"].as_str().unwrap().to_string();
        admin.post(&format!("/v1/instances/{id}/connect"), &json!({})).await.expect(202);
    }
    let seen = wait_for(Duration::from_secs(20), || async {
        let desired = c.worker_metric(0, "paceline_instances_desired", "").await;
        let unleased = c.worker_metric(0, "paceline_instances_unleased", "").await;
        (desired == 2.0 && unleased == 1.0).then_some(())
    })
    .await;
    assert!(seen.is_some(), "{}", c.worker_metrics(0).await);
    for backend in ["postgres", "redis", "nats"] {
        let up = c.worker_metric(0, "paceline_backend_up", &format!("backend=\"{backend}\"")).await;
        assert_eq!(up, 1.0, "{backend}");
    }
}

/// Six instances paired on the cluster (numbers `prefix` + 00..05, named `name-n`).
async fn six_paired(c: &Cluster, prefix: &str, name: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 0..6 {
        let number = format!("{prefix}{n:02}");
        c.phone(&number, false).await;
        let (inst, _) = c.paired_instance(&format!("{name}-{n}"), &number).await;
        ids.push(inst.id.to_string());
    }
    ids
}

/// A worker that joins gets its share: the others hand instances over (a few per scan)
/// and every instance ends up connected again, on one worker each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_worker_takes_its_share_from_the_others() {
    let mut c = Cluster::start(bin(), 1, |_| {}).await;
    let ids = six_paired(&c, "55119999960", "share").await;
    assert_eq!(c.worker_metric(0, "paceline_worker_leases_held", "").await, 6.0);
    c.spawn_worker();
    let balanced = wait_for(Duration::from_secs(30), || async {
        let a = c.worker_metric(0, "paceline_worker_leases_held", "").await;
        let b = c.worker_metric(1, "paceline_worker_leases_held", "").await;
        (a == 3.0 && b == 3.0).then_some(())
    })
    .await;
    assert!(balanced.is_some(), "each worker holds 3");
    assert!(c.worker_metric(0, "paceline_worker_instances_shed_total", "").await >= 3.0);
    for id in &ids {
        c.wait_state(id, "connected", Duration::from_secs(20)).await;
    }
    // One worker measures the fleet's counts a period and shares them: both report them.
    let reported = wait_for(Duration::from_secs(20), || async {
        let mut all = Vec::new();
        for w in 0..2 {
            all.push(c.worker_metric(w, "paceline_instances_desired", "").await);
            all.push(c.worker_metric(w, "paceline_instances_unleased", "").await);
        }
        (all == [6.0, 0.0, 6.0, 0.0]).then_some(())
    })
    .await;
    assert!(reported.is_some(), "both workers report 6 desired, 0 unleased");
}

/// A stopping worker hands its instances over a batch at a time, as fast as the others
/// connect them (here 5 a second: one every 200 ms), so each goes without a session only
/// for its own handoff; every one ends connected on the other worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_worker_hands_over_a_batch_at_a_time() {
    let mut c = Cluster::start(bin(), 1, |cfg| cfg.worker.connects_per_second = 5).await;
    let ids = six_paired(&c, "55119999980", "drain").await;
    let other = c.spawn_worker();
    // The new worker is alive (it took one over): the stopping one hands the rest to it.
    wait_for(Duration::from_secs(30), || async {
        (c.worker_metric(other, "paceline_worker_leases_held", "").await >= 1.0).then_some(())
    })
    .await
    .expect("the second worker takes one");
    let stopped = chrono::Utc::now();
    c.signal(0, "TERM");
    let status = c.workers[0].child.wait().unwrap();
    assert!(status.success(), "the stopped worker exits cleanly: {status:?}");
    for id in &ids {
        c.wait_state(id, "connected", Duration::from_secs(30)).await;
    }
    assert_eq!(c.worker_metric(other, "paceline_worker_leases_held", "").await, 6.0);
    let pool = c.pool().await;
    let released: Vec<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
        "SELECT created_at FROM outbox WHERE instance_id = ANY($1) AND type = 'instance.state' \
         AND payload->'data'->>'state' = 'disconnected' AND created_at >= $2 ORDER BY 1",
    )
    .bind(&ids)
    .bind(stopped)
    .fetch_all(&pool)
    .await
    .unwrap();
    let k = released.len();
    assert!(k >= 3, "the stopping worker held at least 3: {k}");
    // One a batch, batches at least 200 ms apart (the first may end as late as the second
    // begins): the last release at least (k - 2) x 200 ms after the first.
    let spread = released[k - 1] - released[0];
    println!("{k} sessions handed over in {} ms", spread.num_milliseconds());
    assert!(spread >= chrono::Duration::milliseconds(200 * (k as i64 - 2)), "not handed over in batches: {spread}");
}

/// Sessions come back paced after a restart: a fresh worker claims every instance at
/// once, then opens their sessions at `worker.connects_per_second`, never faster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_worker_reconnects_its_sessions_at_the_paced_rate() {
    let mut c = Cluster::start(bin(), 1, |cfg| cfg.worker.connects_per_second = 2).await;
    let ids = six_paired(&c, "55119999970", "storm").await;
    // The whole cluster's workers go at once (no handoff), and one comes back.
    c.signal(0, "KILL");
    let _ = c.workers[0].child.wait();
    let back = c.spawn_worker();
    let pool = c.pool().await;
    let held = wait_for(Duration::from_secs(30), || async {
        (c.worker_metric(back, "paceline_worker_leases_held", "").await == 6.0).then_some(())
    })
    .await;
    assert!(held.is_some(), "the new worker claims all six");
    let restarted = chrono::Utc::now();
    for id in &ids {
        c.wait_state(id, "connected", Duration::from_secs(30)).await;
    }
    let times: Vec<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
        "SELECT state_changed_at FROM instances WHERE id = ANY($1) AND state = 'connected' ORDER BY 1",
    )
    .bind(&ids)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(times.len(), 6);
    assert!(times[0] < restarted + chrono::Duration::seconds(30));
    // Six slots of half a second, each connect inside its own: the last starts at least
    // two seconds after the first (what netsim takes to answer varies by milliseconds).
    let spread = times[5] - times[0];
    println!("six paced reconnects spread over {} ms at 2 per second", spread.num_milliseconds());
    assert!(spread >= chrono::Duration::milliseconds(1_800), "connects not paced: {spread}");
    assert_eq!(c.worker_metric(back, "paceline_worker_connects_waiting", "").await, 0.0);
    assert_eq!(c.worker_metric(back, "paceline_worker_session_events_total", "kind=\"open_failed\"").await, 0.0);
}
