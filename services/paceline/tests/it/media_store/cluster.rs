//! The S3 backend in a running cluster (API, worker, dispatcher, netsim): received media
//! lands in the bucket and is served; the bucket unreachable holds a queued send with
//! media (tried again, sent once when it is back) and keeps received media pending
//! (fetched again once it is back).

use std::time::Duration;

use base64::Engine;
use harness::cluster::{wait_for, Cluster};
use harness::s3::Bucket;
use serde_json::{json, Value};

use crate::bin;

const A: &str = "5511999991001";
const B: &str = "5511999991002";

async fn chat(own: &harness::Client, id: &str, with: &str) -> Vec<Value> {
    let got = own.get(&format!("/v1/instances/{id}/chats/{with}/messages?limit=200")).await.expect(200);
    got["messages"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bucket_down_delays_media_both_ways_and_loses_none() {
    let bucket = Bucket::new().await;
    let c = Cluster::start(bin(), 1, |cfg| {
        bucket.configure(cfg);
        cfg.media.retry_base = Duration::from_millis(500);
    })
    .await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("bucket-cluster", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let own = c.api.client(Some(token));
    let photo = b"\x89PNG a photo from B".to_vec();
    let data = base64::engine::general_purpose::STANDARD.encode(&photo);
    let from_b = |text: &str| json!({ "to": A, "type": "image", "text": text, "media": { "data": data, "mime_type": "image/png" } });

    // Received: in the bucket, served by its signed URL.
    c.netsim().post(&format!("/control/phones/{B}/messages"), &from_b("first")).await.expect(201);
    let first = wait_for(Duration::from_secs(20), || async { chat(&own, &id, B).await.into_iter().next() })
        .await
        .expect("the message is logged");
    let media_id = first["content"]["media"]["id"].as_str().unwrap().to_string();
    let prefix = format!("tenants/media/{id}/{media_id}/");
    let key = bucket.keys().await.into_iter().find(|k| k.starts_with(&prefix)).expect("its object, keyed by ids");
    assert_eq!(bucket.head(&key).await.map(|h| h.1), Some(photo.len() as u64), "{first}");
    let res = reqwest::get(first["content"]["media"]["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(res.bytes().await.unwrap().to_vec(), photo);

    // A send with media queued while the queue is held, then the bucket goes: the worker
    // cannot read the bytes, and tries again.
    own.post(&format!("/v1/instances/{id}/queue/pause"), &json!({})).await.expect(204);
    let doc: Vec<u8> = (0..200_000).map(|i| (i % 253) as u8).collect();
    let body = json!({ "to": B, "type": "document", "client_message_id": "doc-1",
        "media": { "data": base64::engine::general_purpose::STANDARD.encode(&doc), "mime_type": "application/pdf" } });
    let queued = own.post(&format!("/v1/instances/{id}/messages"), &body).await.expect(202);
    bucket.gate.close();
    own.post(&format!("/v1/instances/{id}/queue/resume"), &json!({})).await.expect(204);
    // Received meanwhile: logged at once, its media pending.
    c.netsim().post(&format!("/control/phones/{B}/messages"), &from_b("second")).await.expect(201);
    let second = wait_for(Duration::from_secs(20), || async {
        chat(&own, &id, B).await.into_iter().find(|m| m["content"]["caption"] == "second")
    })
    .await
    .expect("the second message is logged while the bucket is down");
    assert_eq!(second["content"]["media"]["pending"], true, "{second}");
    wait_for(Duration::from_secs(20), || async {
        let failed = c.worker_metric(0, "paceline_queue_reads_failed_total", "").await;
        (failed >= 2.0).then_some(())
    })
    .await
    .expect("the worker tried to read the media and will again");
    let msg = own.get(&format!("/v1/instances/{id}/messages/{}", queued["id"].as_str().unwrap())).await.expect(200);
    assert!(msg["status"] == "queued" || msg["status"] == "in_flight", "waiting, not failed: {msg}");

    // Back: the send goes once, and the received media is fetched again and stored.
    bucket.gate.open();
    let sent = wait_for(Duration::from_secs(30), || async {
        let m = own.get(&format!("/v1/instances/{id}/messages/{}", queued["id"].as_str().unwrap())).await;
        (m.body["status"] == "sent").then_some(m.body)
    })
    .await
    .expect("sent once the bucket is back");
    let inbox = c.netsim().get(&format!("/control/phones/{B}/inbox")).await.expect(200);
    let docs: Vec<&Value> = inbox["messages"].as_array().unwrap().iter().filter(|m| m["type"] == "document").collect();
    assert_eq!(docs.len(), 1, "sent exactly once: {inbox}");
    assert_eq!(docs[0]["id"], sent["wa_message_id"]);
    assert_eq!(docs[0]["body"]["media"]["size"], doc.len());
    let media = wait_for(Duration::from_secs(30), || async {
        let m = chat(&own, &id, B).await.into_iter().find(|m| m["content"]["caption"] == "second")?;
        m["content"]["media"].get("pending").is_none().then(|| m["content"]["media"].clone())
    })
    .await
    .expect("the received media is fetched again");
    let res = reqwest::get(media["url"].as_str().unwrap()).await.unwrap();
    assert_eq!(res.bytes().await.unwrap().to_vec(), photo);
}
