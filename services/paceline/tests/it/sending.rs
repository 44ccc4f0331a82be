//! The send queue end to end over netsim and real worker processes: every type delivered
//! once, failure codes, wait semantics, expiry, pacing measured at the recipient, and a
//! worker killed mid-send losing and duplicating nothing.
//!
//! Here: the two phones and the recipient's inbox. The tests: `changes` (edits and
//! deletions of sent messages, presence), `delivery` (each type,
//! the action routes, quotes by the network's id), `failures` (the failure codes, wait
//! and expiry), `queue` (pacing, the network's rate limit, draining, the sweep) and
//! `recovery` (a killed worker, a re-send after a crash, a failed read).

mod changes;
mod delivery;
mod failures;
mod queue;
mod recovery;

use harness::cluster::Cluster;
use serde_json::Value;

const A: &str = "5511999990001";
const B: &str = "5511999990002";

async fn inbox(c: &Cluster, number: &str) -> Value {
    c.netsim().get(&format!("/control/phones/{number}/inbox")).await.expect(200)
}

/// Queues a text to a number no account has (`messages` is the instance's messages
/// path) and waits until it failed: a message that never reached the network. Its id.
async fn failed_message(own: &harness::Client, messages: &str) -> String {
    let failed = own.post(messages, &serde_json::json!({ "to": "5511999990404", "type": "text", "text": "x" })).await;
    let failed = failed.expect(202)["id"].as_str().unwrap().to_string();
    harness::cluster::wait_for(std::time::Duration::from_secs(10), || async {
        (own.get(&format!("{messages}/{failed}")).await.body["status"] == "failed").then_some(())
    })
    .await
    .expect("the message fails");
    failed
}
