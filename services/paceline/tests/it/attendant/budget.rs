//! What stops an attendant that keeps answering: a loop with another bot, and the
//! instance's budget.

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use serde_json::json;

use super::{consumer_info, events, handled, inbox, pods, provider, say};
use crate::bin;

/// Two attendants answering each other stop: the chat whose last messages are automatic
/// on both sides is handed over (`bot_loop`) and nothing more is sent; and an instance's
/// budget (replies per day here) leaves further messages unanswered with `budget`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attendants_stop_a_bot_loop_and_keep_to_their_budget() {
    const A: &str = "5511977772001";
    const B: &str = "5511977772002";
    const CUST: &str = "5511977772003";
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let (_p, base) = provider().await;
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    for n in [A, B, CUST] {
        c.phone(n, false).await;
    }
    let admin = c.api.admin();
    let mut ids = Vec::new();
    for (name, number, loop_messages) in [("bot-a", A, 6), ("bot-b", B, 0)] {
        let (inst, _) = c.paired_instance(name, number).await;
        let id = inst.id.to_string();
        c.unpaced(&id).await;
        let config = json!({
            "provider": { "kind": "openai", "base_url": format!("{base}/v1"), "model": "m" },
            "allow_private_targets": true,
            "handoff": { "loop_messages": loop_messages },
        });
        admin.put(&format!("/v1/instances/{id}/attendant"), &config).await.expect(200);
        ids.push(id);
    }
    let (a, b) = (ids[0].clone(), ids[1].clone());
    let pool = c.pool().await;
    let _pods = pods(&c, 1);
    wait_for(Duration::from_secs(30), || consumer_info(&c)).await.expect("the attendant starts");

    // B writes to A once; from then on each attendant answers the other's answer.
    let opening = format!("Hello! {}", "We are open from nine to six on weekdays. ".repeat(4));
    admin
        .post(&format!("/v1/instances/{b}/messages"), &json!({ "to": A, "type": "text", "text": opening }))
        .await
        .expect(202);
    let handoff = wait_for(Duration::from_secs(90), || async { events(&pool, &a, "attendant.handoff").await.pop() })
        .await
        .expect("A hands the loop over");
    assert_eq!(handoff["reason"], "bot_loop", "{handoff}");
    let replies = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM attendant_replies WHERE instance_id = $1")
            .bind(&a)
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    assert_eq!(replies().await, 3, "A answered three times: the sixth message of the chat was the loop");
    let shown = admin.get(&format!("/v1/instances/{a}/attendant")).await.expect(200);
    assert_eq!(shown["paused_chats"][0]["reason"], "bot_loop");
    // Nothing more goes from A to B. B answered each of A's three answers; once A's
    // attendant has handled B's last message (the barrier), A has queued nothing more.
    wait_for(Duration::from_secs(30), || async { (inbox(&c, B, A).await.len() == 3).then_some(()) })
        .await
        .expect("B received A's three answers");
    let from_b = wait_for(Duration::from_secs(30), || async {
        let texts = inbox(&c, A, B).await;
        (texts.len() == 4).then_some(texts)
    })
    .await
    .expect("A received B's opening and its three answers");
    handled(&c, &pool, &a, from_b.last().unwrap()).await;
    let sent = |id: String| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM messages WHERE instance_id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!((sent(a.clone()).await, replies().await), (3, 3), "the loop stopped: A queued nothing more");
    assert_eq!(inbox(&c, B, A).await.len(), 3, "the loop stopped");

    // The budget: a day's replies used up, a new customer goes unanswered.
    admin
        .patch(&format!("/v1/instances/{a}/attendant"), &json!({ "budget": { "replies_per_day": 3 } }))
        .await
        .expect(200);
    say(&c, CUST, A, "hi, anyone there?").await;
    let failed = wait_for(Duration::from_secs(30), || async { events(&pool, &a, "attendant.failed").await.pop() })
        .await
        .expect("the message is not answered");
    assert_eq!(
        (failed["reason"].as_str(), failed["detail"].as_str()),
        (Some("budget"), Some("budget.replies_per_day reached"))
    );
    assert!(inbox(&c, CUST, A).await.is_empty());
    stop.cancel();
}
