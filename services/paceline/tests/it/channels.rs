//! Channels over netsim and a real worker: one instance creates a channel and publishes
//! through its queue, another previews it by link, follows it and reads the post from
//! its log with the `channel.post_received` event; a non-owner's publication is refused;
//! each limit of interface.md part 8 is reached and refused with `Retry-After`, and a
//! failed call takes nothing from it.

use std::time::Duration;

use deadpool_redis::redis;
use harness::cluster::{wait_for, Cluster};
use harness::Client;
use serde_json::json;
use shared::ids::InstanceId;

use crate::bin;

const OWNER: &str = "5511966660001";
const FAN: &str = "5511966660002";

/// A 429 past a limit: `Retry-After` within `max` seconds, the limit named in the message.
fn limited(resp: harness::Resp, max: u64, names: &str) {
    let after: u64 = resp
        .headers
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=max).contains(&after), "Retry-After {after}");
    let msg = resp.expect_error(429, "rate_limited");
    assert!(msg.contains(names), "{msg}");
}

/// Fills `n` takes of an instance's limit as if made `ago` earlier (the hour and day
/// windows cannot be waited out in a test).
async fn taken_earlier(c: &Cluster, id: &str, cap: &str, n: usize, ago: Duration) {
    let key = shared::kv::Keys::new(&c.config).cap(cap, &InstanceId::parse(id).unwrap());
    let pool = shared::kv::connect(&c.config).unwrap();
    let mut conn = pool.get().await.unwrap();
    let at = chrono::Utc::now().timestamp_millis() - ago.as_millis() as i64;
    for k in 0..n {
        let _: () =
            redis::cmd("ZADD").arg(&key).arg(at).arg(format!("earlier:{k}")).query_async(&mut conn).await.unwrap();
    }
}

async fn instance(c: &Cluster, name: &str, number: &str) -> (String, Client) {
    let (inst, token) = c.paired_instance(name, number).await;
    (inst.id.to_string(), c.api.client(Some(token)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_is_created_published_to_followed_and_read_within_the_networks_limits() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(OWNER, false).await;
    c.phone(FAN, false).await;
    for n in ["5511966660003", "5511966660004"] {
        c.phone(n, false).await;
    }
    let (oid, owner) = instance(&c, "owner", OWNER).await;
    let (fid, fan) = instance(&c, "fan", FAN).await;

    // Created by one instance: it owns it.
    owner
        .post(&format!("/v1/instances/{oid}/channels"), &json!({ "name": " " }))
        .await
        .expect_error(400, "validation_failed");
    let ch = owner
        .post(&format!("/v1/instances/{oid}/channels"), &json!({ "name": "Bakery news", "description": "fresh" }))
        .await
        .expect(201);
    let jid = ch["jid"].as_str().unwrap().to_string();
    assert!(jid.ends_with("@newsletter"), "{jid}");
    assert_eq!(ch["role"], "owner");
    let link = format!("https://whatsapp.com/channel/{}", ch["invite_code"].as_str().unwrap());

    // The other previews it by link, follows it (counted), and sees itself a subscriber.
    let seen = fan.post(&format!("/v1/instances/{fid}/channels/preview"), &json!({ "link": link })).await.expect(200);
    assert_eq!((seen["jid"].as_str(), seen["role"].as_str()), (Some(jid.as_str()), Some("guest")));
    fan.post(&format!("/v1/instances/{fid}/channels/preview"), &json!({ "link": "https://whatsapp.com/channel/nope" }))
        .await
        .expect_error(404, "not_found");
    let followed = fan.post(&format!("/v1/instances/{fid}/channels/{jid}/follow"), &json!({})).await.expect(200);
    assert_eq!(followed["role"], "subscriber");
    assert_eq!(followed["subscribers"], 1);
    let list = fan.get(&format!("/v1/instances/{fid}/channels")).await.expect(200);
    assert_eq!(list["channels"].as_array().unwrap().len(), 1);
    assert_eq!(fan.post(&format!("/v1/instances/{fid}/channels/{jid}/mute"), &json!({})).await.expect(200)["jid"], jid);

    // A non-owner's publication: 403, and nothing queued.
    let text = json!({ "type": "text", "text": "fresh bread at 7" });
    fan.post(&format!("/v1/instances/{fid}/channels/{jid}/messages"), &text).await.expect_error(403, "forbidden");
    owner
        .post(
            &format!("/v1/instances/{oid}/channels/{jid}/messages"),
            &json!({ "to": FAN, "type": "text", "text": "x" }),
        )
        .await
        .expect_error(400, "validation_failed");
    // The owner's goes through the queue, and reaches the follower's log and webhooks.
    let queued = owner.post(&format!("/v1/instances/{oid}/channels/{jid}/messages"), &text).await.expect(202);
    assert_eq!(queued["to"], jid);
    let posts = wait_for(Duration::from_secs(20), || async {
        let p = fan.get(&format!("/v1/instances/{fid}/channels/{jid}/messages")).await.expect(200)["messages"].clone();
        (!p.as_array().unwrap().is_empty()).then_some(p)
    })
    .await
    .expect("the post reaches the follower");
    assert_eq!(posts[0]["content"]["text"], "fresh bread at 7");
    assert_eq!(posts[0]["from_me"], false);
    // netsim hands followers their copy before it answers the owner, so the owner's
    // worker may record the send just after the follower's logged it.
    let path = format!("/v1/instances/{oid}/messages/{}", queued["id"].as_str().unwrap());
    wait_for(Duration::from_secs(20), || async {
        let m = owner.get(&path).await.expect(200);
        matches!(m["status"].as_str(), Some("sent" | "delivered")).then_some(m)
    })
    .await
    .expect("the owner's post recorded sent");
    let pool = c.pool().await;
    let kinds: Vec<String> =
        sqlx::query_scalar("SELECT type FROM outbox WHERE instance_id = $1 AND type = 'channel.post_received'")
            .bind(&fid)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(kinds.len(), 1);

    // The owner renames it on the phone: the follower hears of it.
    c.netsim().patch(&format!("/control/channels/{jid}"), &json!({ "name": "Bakery news daily" })).await.expect(200);
    let updated = wait_for(Duration::from_secs(20), || async {
        let e: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT payload->'data' FROM outbox WHERE instance_id = $1 AND type = 'channel.updated'",
        )
        .bind(&fid)
        .fetch_all(&pool)
        .await
        .unwrap();
        e.into_iter().next()
    })
    .await
    .expect("channel.updated");
    assert_eq!(updated["name"], "Bakery news daily");
    assert_eq!(updated["jid"], jid);

    // An admin publishes like the owner (the owner receives it); no longer an admin, 403.
    c.netsim().post(&format!("/control/channels/{jid}/admins"), &json!({ "number": FAN })).await.expect(200);
    let by_admin = json!({ "type": "text", "text": "from the admin" });
    fan.post(&format!("/v1/instances/{fid}/channels/{jid}/messages"), &by_admin).await.expect(202);
    wait_for(Duration::from_secs(20), || async {
        let p =
            owner.get(&format!("/v1/instances/{oid}/channels/{jid}/messages")).await.expect(200)["messages"].clone();
        p.as_array().unwrap().iter().any(|m| m["content"]["text"] == "from the admin").then_some(())
    })
    .await
    .expect("the admin's post reaches the owner");
    c.netsim()
        .post(&format!("/control/channels/{jid}/admins"), &json!({ "number": FAN, "admin": false }))
        .await
        .expect(200);
    fan.post(&format!("/v1/instances/{fid}/channels/{jid}/messages"), &by_admin).await.expect_error(403, "forbidden");

    // Reactions: to the post, by its server id on the network; 30 a minute.
    let net_posts = c.netsim().get("/control/channels").await.expect(200);
    let server_id = net_posts["channels"][0]["posts"][0]["server_id"].as_u64().unwrap();
    let react = json!({ "server_id": server_id, "reaction": "🍞" });
    fan.post(
        &format!("/v1/instances/{fid}/channels/{jid}/reactions"),
        &json!({ "server_id": 999_999, "reaction": "x" }),
    )
    .await
    .expect_error(404, "not_found");
    for _ in 0..30 {
        fan.post(&format!("/v1/instances/{fid}/channels/{jid}/reactions"), &react).await.expect(204);
    }
    limited(fan.post(&format!("/v1/instances/{fid}/channels/{jid}/reactions"), &react).await, 60, "reactions a minute");
    let net_posts = c.netsim().get("/control/channels").await.expect(200);
    assert_eq!(net_posts["channels"][0]["posts"][0]["reactions"], json!([{ "reaction": "🍞", "count": 1 }]));

    // Follows and unfollows: 3 a minute (the follow above was one). A failed call (no such
    // channel on the network) takes nothing.
    let ghost = "120363999999999999@newsletter";
    for _ in 0..3 {
        fan.post(&format!("/v1/instances/{fid}/channels/{ghost}/follow"), &json!({}))
            .await
            .expect_error(404, "not_found");
    }
    fan.post(&format!("/v1/instances/{fid}/channels/{jid}/unfollow"), &json!({})).await.expect(200);
    fan.post(&format!("/v1/instances/{fid}/channels/{jid}/follow"), &json!({})).await.expect(200);
    limited(fan.post(&format!("/v1/instances/{fid}/channels/{jid}/unfollow"), &json!({})).await, 60, "a minute");
    // 10 an hour and 30 a day: earlier takes fill the windows.
    let (hid, other) = instance(&c, "other", "5511966660003").await;
    taken_earlier(&c, &hid, "channel_follows_h", 10, Duration::from_secs(600)).await;
    limited(other.post(&format!("/v1/instances/{hid}/channels/{jid}/follow"), &json!({})).await, 3600, "an hour");
    let (did, day) = instance(&c, "day", "5511966660004").await;
    taken_earlier(&c, &did, "channel_follows_d", 30, Duration::from_secs(7200)).await;
    limited(day.post(&format!("/v1/instances/{did}/channels/{jid}/follow"), &json!({})).await, 86_400, "a day");
    // Refused by a later window, the earlier ones get their take back: past 3 tries the
    // minute's window would refuse otherwise.
    for _ in 0..3 {
        limited(day.post(&format!("/v1/instances/{did}/channels/{jid}/follow"), &json!({})).await, 86_400, "a day");
    }

    // Creations: 2 a day (one made above).
    owner.post(&format!("/v1/instances/{oid}/channels"), &json!({ "name": "Second" })).await.expect(201);
    limited(
        owner.post(&format!("/v1/instances/{oid}/channels"), &json!({ "name": "Third" })).await,
        86_400,
        "creations a day",
    );

    // Publications: 20 a day (one made above); a refused one (403, 400) took nothing.
    // A post sent as an ordinary message to the channel's JID is a publication too.
    let as_message = json!({ "to": jid, "type": "text", "text": "post 1" });
    owner.post(&format!("/v1/instances/{oid}/messages"), &as_message).await.expect(202);
    for k in 2..20 {
        owner
            .post(
                &format!("/v1/instances/{oid}/channels/{jid}/messages"),
                &json!({ "type": "text", "text": format!("post {k}") }),
            )
            .await
            .expect(202);
    }
    let over = owner.post(&format!("/v1/instances/{oid}/channels/{jid}/messages"), &text).await;
    limited(over, 86_400, "publications a day");
    let json = json!({ "to": jid, "type": "text", "text": "one more" });
    limited(owner.post(&format!("/v1/instances/{oid}/messages"), &json).await, 86_400, "publications a day");
    let queued_count: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE instance_id = $1")
        .bind(&oid)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(queued_count, 20, "the refused publication queued nothing");
    // Every event it emitted is of its type's shape and schema.
    harness::events::check_emitted(&c.pool().await).await;
}
