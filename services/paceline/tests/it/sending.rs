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
