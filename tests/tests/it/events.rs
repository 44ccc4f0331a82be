//! The outbox relay: events committed with their change reach JetStream under their own
//! id, and publishing one again (as after a crash before marking it) adds nothing.

use std::time::Duration;

use futures::StreamExt;
use harness::cluster::wait_for;
use harness::TestApi;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_jetstream_once_under_their_id() {
    let api = TestApi::start().await;
    let dispatcher = tokio::spawn(dispatcher::run(api.config.clone(), api.shutdown.clone()));
    let (inst, token) = api.create_instance("ev").await;
    let id = inst["id"].as_str().unwrap().to_string();
    let m = api.client(Some(token)).post(&format!("/v1/instances/{id}/messages"), &json!({ "to": "5511999990001", "type": "text", "text": "x" })).await.expect(202);
    let db = shared::db::connect(&api.config).await.unwrap();
    let published = || async {
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM outbox WHERE instance_id = $1 AND published_at IS NOT NULL")
            .bind(&id)
            .fetch_one(&db)
            .await
            .unwrap();
        (n == 1).then_some(())
    };
    wait_for(Duration::from_secs(10), published).await.expect("the relay publishes the event");

    let nats = shared::bus::connect(&api.config, "test").await.unwrap();
    let js = async_nats::jetstream::new(nats);
    let subjects = shared::bus::Subjects::new(&api.config);
    let mut stream = js.get_stream(subjects.events_stream()).await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::Config::default())
        .await
        .unwrap();
    let mut msgs = consumer.fetch().max_messages(10).expires(Duration::from_secs(2)).messages().await.unwrap();
    let msg = msgs.next().await.unwrap().unwrap();
    let body: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap();
    assert_eq!(body["type"], "message.queued");
    assert_eq!(body["data"]["id"], m["id"]);
    assert!(msg.subject.as_str().ends_with(&format!(".events.{id}.message.queued")));
    let msg_id = msg.headers.as_ref().and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID)).map(|v| v.as_str().to_string());
    assert_eq!(msg_id.as_deref(), body["id"].as_str(), "published under the event's id");

    // As if the relay died after publishing but before marking: it publishes again, and
    // the stream keeps one copy.
    sqlx::query("UPDATE outbox SET published_at = NULL WHERE instance_id = $1").bind(&id).execute(&db).await.unwrap();
    wait_for(Duration::from_secs(10), published).await.expect("published again");
    assert_eq!(stream.info().await.unwrap().state.messages, 1, "de-duplicated by Nats-Msg-Id");
    api.shutdown.cancel();
    dispatcher.await.unwrap().unwrap();
}
