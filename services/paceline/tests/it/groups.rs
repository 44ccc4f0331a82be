//! Groups end to end over netsim and real worker processes: create, read, edit,
//! members with a result each, invite links and joining, leaving; a group message
//! reaching every member once and a member's message reaching the instance; the
//! network's refusals mapped to our errors; the per-instance caps.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use harness::Client;
use serde_json::{json, Value};

use crate::bin;

const A: &str = "5511999991001";
const B: &str = "5511999991002";
const C: &str = "5511999991003";
const NOBODY: &str = "5511999991999";

fn user(n: &str) -> String {
    format!("{n}@s.whatsapp.net")
}

async fn inbox(c: &Cluster, number: &str) -> Vec<Value> {
    let v: Value = c.netsim().get(&format!("/control/phones/{number}/inbox")).await.expect(200);
    v["messages"].as_array().unwrap().clone()
}

/// A phone's own operation on netsim (as its devices would ask it).
async fn phone_op(c: &Cluster, number: &str, op: Value) -> Value {
    c.netsim().post(&format!("/control/phones/{number}/ops"), &op).await.expect(200)
}

/// A 429 past a cap: `Retry-After` in whole seconds, within the cap's window.
fn capped(resp: harness::Resp) {
    let after: u64 = resp
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=86_400).contains(&after), "Retry-After {after}");
    resp.expect_error(429, "rate_limited");
}

async fn cluster(tweak: impl FnOnce(&mut shared::Config)) -> (Cluster, String, Client) {
    let c = Cluster::start(bin(), 1, tweak).await;
    for n in [A, B, C] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("groups", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    (c, id, own)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_edit_members_invite_join_and_leave() {
    let (c, id, own) = cluster(|_| {}).await;
    let base = format!("/v1/instances/{id}/groups");

    // Create with members; a number with no account is left out.
    let g = own.post(&base, &json!({ "subject": " Team ", "participants": [B, user(C), NOBODY, B] })).await.expect(201);
    let gjid = g["jid"].as_str().unwrap().to_string();
    assert!(gjid.ends_with("@g.us"), "{g}");
    assert_eq!(g["subject"], "Team");
    assert_eq!(g["owner"], user(A));
    let roles: Vec<(String, String)> = g["participants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["phone"].as_str().unwrap().to_string(), p["role"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(roles, [(A.into(), "superadmin".into()), (B.into(), "member".into()), (C.into(), "member".into())]);

    // Read and list.
    let read = own.get(&format!("{base}/{gjid}")).await.expect(200);
    assert_eq!(read["jid"], gjid.as_str());
    assert_eq!(read["announce"], false);
    let list = own.get(&base).await.expect(200);
    assert_eq!(list["groups"].as_array().unwrap().len(), 1);
    assert!(list.get("next_cursor").is_none());

    // Edit: subject, description, announce and lock, answered with the group as it is.
    let edited = own
        .patch(
            &format!("{base}/{gjid}"),
            &json!({ "subject": "Team 2", "description": "ours", "announce": true, "locked": true }),
        )
        .await
        .expect(200);
    assert_eq!(edited["subject"], "Team 2");
    assert_eq!(edited["description"], "ours");
    assert_eq!(edited["announce"], true);
    assert_eq!(edited["locked"], true);

    // Members: a result each; one refused stops none of the others.
    let r = own
        .post(&format!("{base}/{gjid}/participants"), &json!({ "action": "remove", "participants": [C, NOBODY] }))
        .await
        .expect(200);
    assert_eq!(r["results"][0], json!({ "jid": user(C), "ok": true }));
    assert_eq!(r["results"][1]["jid"], user(NOBODY));
    assert_eq!(r["results"][1]["error"]["code"], "invalid_number");
    let r = own
        .post(&format!("{base}/{gjid}/participants"), &json!({ "action": "promote", "participants": [B] }))
        .await
        .expect(200);
    assert_eq!(r["results"][0]["ok"], true);
    let g = own.get(&format!("{base}/{gjid}")).await.expect(200);
    let b = g["participants"].as_array().unwrap().iter().find(|p| p["phone"] == B).unwrap().clone();
    assert_eq!(b["role"], "admin");

    // Invite link: C joins by it (as a phone); a reset link makes the old one unknown.
    let link = own.get(&format!("{base}/{gjid}/invite-link")).await.expect(200)["link"].as_str().unwrap().to_string();
    assert!(link.starts_with("https://chat.whatsapp.com/"), "{link}");
    let joined = phone_op(&c, C, json!({ "op": "join_group", "link": link })).await;
    assert_eq!(joined["jid"], gjid.as_str());
    let new = own.get(&format!("{base}/{gjid}/invite-link?reset=true")).await.expect(200)["link"].clone();
    assert_ne!(new.as_str().unwrap(), link);
    // What a link leads to, without joining: by its code; the reset link's old code is 404
    // and what is no code at all is 400.
    let code = new.as_str().unwrap().rsplit('/').next().unwrap().to_string();
    let info = own.get(&format!("{base}/invites/{code}")).await.expect(200);
    assert_eq!((info["jid"].as_str(), info["subject"].as_str()), (Some(gjid.as_str()), Some("Team 2")));
    own.get(&format!("{base}/invites/{}", link.rsplit('/').next().unwrap())).await.expect_error(404, "not_found");
    own.get(&format!("{base}/invites/no-code")).await.expect_error(400, "validation_failed");
    // Disappearing messages: one of the network's lifetimes, and off again.
    let g = own.patch(&format!("{base}/{gjid}"), &json!({ "ephemeral": 604_800 })).await.expect(200);
    assert_eq!(g["ephemeral"], 604_800);
    own.patch(&format!("{base}/{gjid}"), &json!({ "ephemeral": 60 })).await.expect_error(400, "validation_failed");
    assert_eq!(own.patch(&format!("{base}/{gjid}"), &json!({ "ephemeral": 0 })).await.expect(200)["ephemeral"], 0);

    // The instance joins a group a phone made, by its link, then leaves it.
    let other = phone_op(&c, B, json!({ "op": "create_group", "subject": "B's", "participants": [C] })).await;
    let ojid = other["jid"].as_str().unwrap().to_string();
    let olink = phone_op(&c, B, json!({ "op": "group_invite_link", "jid": ojid, "reset": false })).await;
    let g = own.post(&format!("{base}/join"), &json!({ "link": olink["link"] })).await.expect(200);
    assert_eq!(g["jid"], ojid.as_str());
    assert!(g["participants"].as_array().unwrap().iter().any(|p| p["phone"] == A && p["role"] == "member"));
    // Not an admin there: changing its members or settings is refused.
    own.post(&format!("{base}/{ojid}/participants"), &json!({ "action": "add", "participants": [C] }))
        .await
        .expect_error(403, "forbidden");
    own.patch(&format!("{base}/{ojid}"), &json!({ "announce": true })).await.expect_error(403, "forbidden");
    own.post(&format!("{base}/{ojid}/leave"), &json!({})).await.expect(204);
    // The changes came in as events, through the outbox: the instance's own and others'.
    let db = c.pool().await;
    let events = wait_for(Duration::from_secs(20), || async {
        let rows: Vec<(String, Value)> = sqlx::query_as(
            "SELECT type, payload FROM outbox WHERE instance_id = $1 AND type LIKE 'group.%' ORDER BY id",
        )
        .bind(&id)
        .fetch_all(&db)
        .await
        .unwrap();
        rows.iter().any(|(t, _)| t == "group.left").then_some(rows)
    })
    .await
    .expect("group events are recorded");
    let of = |t: &str| events.iter().filter(|(k, _)| k == t).map(|(_, p)| p.clone()).collect::<Vec<Value>>();
    let updated = of("group.updated");
    assert!(updated.iter().any(|p| p["data"]["subject"] == "Team 2" && p["data"]["by"] == user(A)), "{updated:?}");
    let changes = of("group.participants_updated");
    assert!(
        changes.iter().any(|p| p["data"]["action"] == "removed" && p["data"]["participants"] == json!([user(C)])),
        "{changes:?}"
    );
    assert!(
        changes.iter().any(|p| p["data"]["action"] == "joined" && p["data"]["participants"] == json!([user(C)])),
        "C joined by link: {changes:?}"
    );
    assert_eq!(of("group.joined").len(), 1, "the instance joined B's group by link");
    assert_eq!(of("group.left")[0]["data"]["jid"], ojid.as_str());
    own.get(&format!("{base}/{ojid}")).await.expect_error(404, "not_found");
    let list = own.get(&base).await.expect(200);
    assert_eq!(list["groups"].as_array().unwrap().len(), 1, "{list}");
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&c.pool().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_messages_reach_every_member_once_and_come_back_in() {
    let (c, id, own) = cluster(|_| {}).await;
    let g = own
        .post(&format!("/v1/instances/{id}/groups"), &json!({ "subject": "Chat", "participants": [B, C] }))
        .await
        .expect(201);
    let gjid = g["jid"].as_str().unwrap().to_string();

    // Out: through the paced queue, once per member.
    let m = own
        .post(
            &format!("/v1/instances/{id}/messages?wait=true&timeout=20s"),
            &json!({ "to": gjid, "type": "text", "text": "hello all" }),
        )
        .await
        .expect(200);
    assert_eq!(m["status"], "sent", "{m}");
    for member in [B, C] {
        let got = inbox(&c, member).await;
        let copies: Vec<&Value> = got.iter().filter(|x| x["id"] == m["wa_message_id"]).collect();
        assert_eq!(copies.len(), 1, "{member}: {got:?}");
        assert_eq!(copies[0]["group"], gjid.as_str());
        assert_eq!(copies[0]["from"], A);
    }
    assert!(inbox(&c, A).await.is_empty(), "the sender gets no copy");

    // In: a member's message arrives with the group as the chat and the member as sender.
    let sent: Value = c
        .netsim()
        .post(&format!("/control/phones/{B}/messages"), &json!({ "to": gjid, "type": "text", "text": "hi from B" }))
        .await
        .expect(201);
    let path = format!("/v1/instances/{id}/chats/{gjid}/messages");
    let msgs = wait_for(Duration::from_secs(20), || async {
        let v: Value = own.get(&path).await.expect(200);
        let msgs = v["messages"].as_array().unwrap().clone();
        msgs.iter().any(|x| x["wa_message_id"] == sent["id"]).then_some(msgs)
    })
    .await
    .expect("the member's message is logged in the group's chat");
    let inbound = msgs.iter().find(|x| x["wa_message_id"] == sent["id"]).unwrap();
    assert_eq!(inbound["chat_jid"], gjid.as_str());
    assert_eq!(inbound["from_jid"], user(B));
    assert_eq!(inbound["from_me"], false);
    let chats: Value = own.get(&format!("/v1/instances/{id}/chats")).await.expect(200);
    assert!(chats["chats"].as_array().unwrap().iter().any(|ch| ch["jid"] == gjid.as_str()), "{chats}");

    // Announcement mode set by another admin: a member's send fails as forbidden.
    let bg = phone_op(&c, B, json!({ "op": "create_group", "subject": "News", "participants": [A] })).await;
    phone_op(&c, B, json!({ "op": "update_group", "jid": bg["jid"], "announce": true })).await;
    own.post(
        &format!("/v1/instances/{id}/messages?wait=true&timeout=20s"),
        &json!({ "to": bg["jid"], "type": "text", "text": "may I?" }),
    )
    .await
    .expect_error(403, "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_refusals_and_caps() {
    let (c, id, own) = cluster(|cfg| {
        cfg.groups.creates_per_day = 2;
        cfg.groups.participant_changes_per_minute = 3;
        cfg.groups.joins_per_day = 1;
    })
    .await;
    let base = format!("/v1/instances/{id}/groups");
    // Bad input: 400 and nothing created.
    own.post(&base, &json!({ "subject": "  " })).await.expect_error(400, "validation_failed");
    own.post(&base, &json!({ "subject": "x".repeat(101) })).await.expect_error(400, "validation_failed");
    own.post(&base, &json!({ "subject": "ok", "participants": ["not-a-number"] }))
        .await
        .expect_error(400, "validation_failed");
    own.post(&base, &json!({ "subject": "ok", "participants": ["120363000000000001@g.us"] }))
        .await
        .expect_error(400, "validation_failed");
    own.get(&format!("{base}/{}", user(B))).await.expect_error(400, "validation_failed");
    own.get(&format!("{base}/120363999999999999@g.us")).await.expect_error(404, "not_found");
    let many: Vec<String> = (0..1025).map(|i| format!("55119{i:08}")).collect();
    own.post(&base, &json!({ "subject": "big", "participants": many })).await.expect_error(400, "validation_failed");
    assert_eq!(own.get(&base).await.expect(200)["groups"].as_array().unwrap().len(), 0);

    // Creation cap: 2, then 429 with Retry-After; a refused create takes nothing.
    let g = own.post(&base, &json!({ "subject": "one", "participants": [B] })).await.expect(201);
    own.post(&base, &json!({ "subject": "two" })).await.expect(201);
    let post = |path: String, body: Value| own.send(own.request(reqwest::Method::POST, &path).json(&body));
    capped(post(base.clone(), json!({ "subject": "three" })).await);

    // Participant changes: 3 a minute, counted per member; members the network refused
    // give theirs back.
    let gjid = g["jid"].as_str().unwrap();
    let p = format!("{base}/{gjid}/participants");
    let r = own.post(&p, &json!({ "action": "add", "participants": [C, NOBODY] })).await.expect(200);
    assert_eq!(r["results"][0]["ok"], true);
    assert!(r["results"][1]["error"].is_object());
    own.post(&p, &json!({ "action": "promote", "participants": [B, C] })).await.expect(200);
    capped(post(p.clone(), json!({ "action": "demote", "participants": [B] })).await);
    own.post(&p, &json!({ "action": "add", "participants": [B, C, NOBODY, "5511999991998"] }))
        .await
        .expect_error(400, "validation_failed");

    // Joins: 1 a day.
    let other = phone_op(&c, B, json!({ "op": "create_group", "subject": "B's", "participants": [] })).await;
    let link = phone_op(&c, B, json!({ "op": "group_invite_link", "jid": other["jid"], "reset": false })).await;
    own.post(&format!("{base}/join"), &json!({ "link": "https://chat.whatsapp.com/unknowncode1" }))
        .await
        .expect_error(404, "not_found");
    own.post(&format!("{base}/join"), &json!({ "link": link["link"] })).await.expect(200);
    capped(post(format!("{base}/join"), json!({ "link": link["link"] })).await);

    // Not running: 409, before any cap is taken.
    let (stopped, _) = c.api.create_instance("stopped").await;
    let sid = stopped.id.as_str();
    c.api.admin().get(&format!("/v1/instances/{sid}/groups")).await.expect_error(409, "instance_not_connected");
    // Another instance's token: 403.
    let (_, other_token) = c.api.create_instance("other").await;
    c.api.client(Some(other_token)).get(&base).await.expect_error(403, "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_community_with_a_linked_and_an_unlinked_group() {
    let (c, id, own) = cluster(|_| {}).await;
    let base = format!("/v1/instances/{id}/communities");
    let cm = own.post(&base, &json!({ "name": "Neighbours", "description": "street" })).await.expect(201);
    let cjid = cm["jid"].as_str().unwrap().to_string();
    assert_eq!(cm["community"]["is_parent"], true);
    assert_eq!(cm["subject"], "Neighbours");
    // Its announcement group came with it.
    let groups = own.get(&format!("{base}/{cjid}/groups")).await.expect(200);
    let list = groups["groups"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{groups}");
    assert_eq!(list[0]["is_announcement_group"], true);
    let announce = list[0]["jid"].as_str().unwrap().to_string();
    // Two ordinary groups: one linked, one not.
    let g1 = own
        .post(&format!("/v1/instances/{id}/groups"), &json!({ "subject": "Linked", "participants": [B] }))
        .await
        .expect(201);
    let g2 = own
        .post(&format!("/v1/instances/{id}/groups"), &json!({ "subject": "Apart", "participants": [C] }))
        .await
        .expect(201);
    let r = own
        .post(&format!("{base}/{cjid}/groups"), &json!({ "groups": [g1["jid"], "120363999999999998@g.us"] }))
        .await
        .expect(200);
    assert_eq!(r["results"][0], json!({ "jid": g1["jid"], "ok": true }));
    assert_eq!(r["results"][1]["error"]["code"], "not_found");
    let linked = own.get(&format!("/v1/instances/{id}/groups/{}", g1["jid"].as_str().unwrap())).await.expect(200);
    assert_eq!(linked["community"]["parent"], cjid.as_str());
    let apart = own.get(&format!("/v1/instances/{id}/groups/{}", g2["jid"].as_str().unwrap())).await.expect(200);
    assert_eq!(apart["community"]["parent"], json!(null));
    let groups = own.get(&format!("{base}/{cjid}/groups")).await.expect(200);
    assert_eq!(groups["groups"].as_array().unwrap().len(), 2);
    // The community is listed; a plain group is not a community.
    let all = own.get(&base).await.expect(200);
    assert_eq!(all["communities"].as_array().unwrap().len(), 1);
    own.get(&format!("{base}/{}", g2["jid"].as_str().unwrap())).await.expect_error(404, "not_found");
    // Unlinking: the group leaves; the announcement group stays.
    own.delete(&format!("{base}/{cjid}/groups/{}", g1["jid"].as_str().unwrap())).await.expect(204);
    own.delete(&format!("{base}/{cjid}/groups/{}", g1["jid"].as_str().unwrap())).await.expect_error(404, "not_found");
    own.delete(&format!("{base}/{cjid}/groups/{announce}")).await.expect_error(403, "forbidden");
    // Each link change is a `community.groups_updated` event, through the outbox.
    let db = c.pool().await;
    let events = wait_for(Duration::from_secs(20), || async {
        let rows: Vec<(Value,)> = sqlx::query_as(
            "SELECT payload->'data' FROM outbox WHERE instance_id = $1 AND type = 'community.groups_updated' ORDER BY created_at, id",
        )
        .bind(&id)
        .fetch_all(&db)
        .await
        .unwrap();
        (rows.len() == 2).then_some(rows)
    })
    .await
    .expect("a linked and an unlinked event");
    assert_eq!(events[0].0["action"], "linked");
    assert_eq!(events[0].0["jid"], cjid.as_str());
    assert_eq!(events[0].0["groups"], json!([g1["jid"]]));
    assert_eq!(events[1].0["action"], "unlinked");
    // Its name and settings use the group routes with its JID.
    let renamed =
        own.patch(&format!("/v1/instances/{id}/groups/{cjid}"), &json!({ "subject": "Street" })).await.expect(200);
    assert_eq!(renamed["subject"], "Street");
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&c.pool().await).await;
}
