//! The Chatwoot bridge against a Chatwoot double whose every request and answer is
//! checked against Chatwoot's published description: an inbox made once, received
//! messages (text, media, group, reply, reaction) in their conversations once, agents'
//! replies (text, a file) out through the paced queue once however often Chatwoot posts
//! them, a failed send told back as a private note, and Chatwoot failing, down and
//! acting-then-failing with every message in Chatwoot exactly once, in order.

use std::time::Duration;

use base64::Engine;
use harness::chatwoot::{ChatwootDouble, Fault, TOKEN};
use harness::cluster::{wait_for, Cluster};
use serde_json::{json, Value};

use crate::bin;

const SHOP: &str = "5511977780001";
const ANA: &str = "5511977780002";
const BEN: &str = "5511977780003";

pub(crate) async fn say(c: &Cluster, from: &str, to: &str, body: Value) -> String {
    let mut b = body;
    b["to"] = json!(to);
    let v = c.netsim().post(&format!("/control/phones/{from}/messages"), &b).await.expect(201);
    v["id"].as_str().unwrap().to_string()
}

/// A logged message's content, by its network id.
async fn logged(pool: &sqlx::PgPool, id: &str, wa: &str) -> Value {
    sqlx::query_scalar("SELECT content FROM log_messages WHERE instance_id = $1 AND wa_message_id = $2")
        .bind(id)
        .bind(wa)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn inbox(c: &Cluster, number: &str) -> Vec<Value> {
    let v = c.netsim().get(&format!("/control/phones/{number}/inbox")).await.expect(200);
    v["messages"].as_array().unwrap().iter().filter(|m| m["from"] == SHOP).cloned().collect()
}

/// Waits until Chatwoot holds `n` messages matching `f`.
pub(crate) async fn held(cw: &ChatwootDouble, n: usize, f: impl Fn(&harness::chatwoot::CwMessage) -> bool) {
    wait_for(Duration::from_secs(60), || async { (cw.messages().iter().filter(|m| f(m)).count() >= n).then_some(()) })
        .await
        .unwrap_or_else(|| panic!("Chatwoot holds {n} such messages: {:#?}", cw.messages()));
}

async fn setup(c: &Cluster, cw: &ChatwootDouble) -> (String, String) {
    for n in [SHOP, ANA, BEN] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("shop", SHOP).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token.clone()));
    let path = format!("/v1/instances/{id}/chatwoot");
    let body = json!({ "url": cw.url(), "account_id": 1, "token": TOKEN });
    own.get(&path).await.expect_error(404, "not_found");
    // Chatwoot on loopback: only the admin may allow it.
    own.put(&path, &body).await.expect_error(400, "validation_failed");
    let mut private = body.clone();
    private["allow_private_targets"] = json!(true);
    own.put(&path, &private).await.expect_error(403, "forbidden");
    let shown = c.api.admin().put(&path, &private).await.expect(200);
    assert_eq!(shown["token_set"], true);
    assert_eq!(shown["allow_private_targets"], true);
    let shown = own.get(&path).await;
    assert!(!shown.text.contains(TOKEN), "the token is never shown");
    // The owner may change other settings and keeps the admin's allowance and the token.
    let patched = own.patch(&path, &json!({ "sign_delimiter": " " })).await.expect(200);
    assert_eq!(patched["allow_private_targets"], true);
    own.patch(&path, &json!({ "nope": 1 })).await.expect_error(400, "validation_failed");
    wait_for(Duration::from_secs(30), || async { (cw.inboxes().len() == 1).then_some(()) }).await.expect("an inbox");
    let (_, name, hook) = cw.inboxes()[0].clone();
    assert_eq!(name, "shop");
    assert_eq!(hook, shown.body["webhook_url"].as_str().unwrap());
    (id, token)
}

/// The test's configuration for the bridge: the API's address, short waits.
fn config(c: &Cluster) -> shared::Config {
    let mut config = c.config.clone();
    config.listen_addr = c.api.addr;
    config.chatwoot.retry_base = Duration::from_millis(100);
    config.chatwoot.retry_max = Duration::from_millis(800);
    config.chatwoot.lock = Duration::from_secs(4);
    config
}

/// The bridge (and the dispatcher's relay) in this process.
pub(crate) fn bridge(c: &Cluster) -> shared::Shutdown {
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(config(c), stop.clone()));
    tokio::spawn(chatwoot::run(config(c), stop.clone()));
    stop
}

/// Bridge pods as processes (killed when dropped).
struct Pods(Vec<std::process::Child>);

impl Drop for Pods {
    fn drop(&mut self) {
        for p in &mut self.0 {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

fn pods(c: &Cluster, n: usize) -> Pods {
    Pods(
        (0..n)
            .map(|_| {
                harness::cluster::command(bin(), "chatwoot", &config(c))
                    .env("PACELINE_METRICS_ADDR", harness::cluster::free_addr().to_string())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_reach_the_inbox_and_agents_reply_each_once() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let cw = ChatwootDouble::start().await;
    let stop = bridge(&c);
    let (id, token) = setup(&c, &cw).await;

    // A contact writes: a contact, a conversation and the message, incoming.
    let first = say(&c, ANA, SHOP, json!({ "text": "hi, are you open?" })).await;
    held(&cw, 1, |m| m.content.as_deref() == Some("hi, are you open?")).await;
    let contacts = cw.contacts();
    assert_eq!(contacts.len(), 1);
    assert_eq!(contacts[0].2, format!("{ANA}@s.whatsapp.net"));
    assert_eq!(contacts[0].3.as_deref(), Some(format!("+{ANA}").as_str()));
    let conv = cw.conversations()[0].0;
    let m = cw.messages()[0].clone();
    assert_eq!((m.conversation_id, m.message_type.as_str()), (conv, "incoming"));
    assert_eq!(m.source_id, Some(format!("WAID:{first}")));

    // A picture with a caption, then a reply to the first message: the same conversation.
    let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\nnot really a png");
    say(
        &c,
        ANA,
        SHOP,
        json!({ "type": "image", "text": "the menu", "media": { "data": png, "mime_type": "image/png" } }),
    )
    .await;
    say(&c, ANA, SHOP, json!({ "text": "hello?", "body": { "reply_to": first } })).await;
    held(&cw, 1, |m| m.content.as_deref() == Some("hello?")).await;
    let msgs = cw.messages();
    let image = msgs.iter().find(|m| m.content.as_deref() == Some("the menu")).expect("the picture");
    assert_eq!(image.files.len(), 1, "the picture is attached");
    assert_eq!(image.files[0].2, b"\x89PNG\r\n\x1a\nnot really a png");
    let reply = msgs.iter().find(|m| m.content.as_deref() == Some("hello?")).unwrap();
    assert_eq!(reply.in_reply_to, Some(m.id));
    assert!(msgs.iter().all(|m| m.conversation_id == conv));
    assert_eq!(cw.conversations().len(), 1);

    // Ana edits her first message and deletes her picture: the edit comes as a reply to
    // it, and the picture is deleted in Chatwoot; the log keeps both, marked.
    let picture = msgs.iter().find(|m| m.content.as_deref() == Some("the menu")).unwrap().clone();
    let pic_wa = picture.source_id.clone().unwrap().trim_start_matches("WAID:").to_string();
    say(&c, ANA, SHOP, json!({ "type": "edit", "text": "hi, are you open today?", "body": { "target": first } })).await;
    say(&c, ANA, SHOP, json!({ "type": "revoke", "body": { "target": pic_wa } })).await;
    // The network repeating a deletion changes nothing more.
    say(&c, ANA, SHOP, json!({ "type": "revoke", "body": { "target": pic_wa } })).await;
    held(&cw, 1, |m| m.content.as_deref() == Some("✏️ hi, are you open today?")).await;
    let edited =
        cw.messages().into_iter().find(|m| m.content.as_deref() == Some("✏️ hi, are you open today?")).unwrap();
    assert_eq!((edited.in_reply_to, edited.message_type.as_str()), (Some(m.id), "incoming"));
    held(&cw, 1, |m| m.id == picture.id && m.deleted).await;
    let pool = c.pool().await;
    let edited_log = logged(&pool, &id, &first).await;
    assert_eq!(edited_log["text"], "hi, are you open today?");
    assert!(edited_log["edited_at"].is_string());

    // Someone else's "edit" of Ana's message changes nothing and tells no one.
    say(&c, BEN, SHOP, json!({ "type": "edit", "text": "forged", "body": { "target": first } })).await;

    // An agent answers: one message on WhatsApp, signed; Chatwoot posting it again sends nothing more.
    let (agent_msg, status) = cw.agent_reply(conv, "We open at 9", vec![]).await;
    assert_eq!(status, 200);
    wait_for(Duration::from_secs(30), || async { (!inbox(&c, ANA).await.is_empty()).then_some(()) })
        .await
        .expect("the contact gets the agent's answer");
    assert_eq!(inbox(&c, ANA).await[0]["text"], "*Ana Agent:* We open at 9");
    let again = json!({ "event": "message_created", "id": agent_msg, "content": "We open at 9", "message_type": "outgoing",
        "private": false, "source_id": null, "conversation": { "id": conv }, "sender": { "name": "Ana Agent" } });
    assert_eq!(cw.post_hook(&again).await, 200);
    // What the bridge made itself comes back as message_created too: never sent.
    let echo = json!({ "event": "message_created", "id": m.id, "content": m.content, "message_type": "incoming",
        "private": false, "source_id": m.source_id, "conversation": { "id": conv } });
    assert_eq!(cw.post_hook(&echo).await, 200);
    let note = json!({ "event": "message_created", "id": 999_999, "content": "internal", "message_type": "outgoing",
        "private": true, "conversation": { "id": conv } });
    assert_eq!(cw.post_hook(&note).await, 200);

    // A file from the agent goes out as an image through the media store.
    let (_, status) = cw
        .agent_reply(
            conv,
            "see attached",
            vec![("p.png".into(), "image/png".into(), b"\x89PNG\r\n\x1a\nagent".to_vec())],
        )
        .await;
    assert_eq!(status, 200);
    wait_for(Duration::from_secs(30), || async { (inbox(&c, ANA).await.len() == 2).then_some(()) })
        .await
        .expect("the contact gets the file");
    // Both agent messages went out once each (the repeated webhook and the echo sent nothing).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = inbox(&c, ANA).await;
    assert_eq!(got.len(), 2, "{got:#?}");
    assert_eq!(got[1]["type"], "image");
    let sent: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM messages WHERE instance_id = $1 AND client_message_id LIKE 'chatwoot-%'",
    )
    .bind(&id)
    .fetch_one(&c.pool().await)
    .await
    .unwrap();
    assert_eq!(sent, 2);

    // A webhook naming a file elsewhere on a private address (not Chatwoot's, which the
    // admin allowed) never has it fetched: the agents are told the message was not sent.
    let sneaky = json!({ "event": "message_created", "id": 777_001, "content": "", "message_type": "outgoing",
        "private": false, "source_id": null, "conversation": { "id": conv }, "sender": { "name": "Mallory" },
        "attachments": [{ "file_type": "file", "data_url": format!("http://{}/control/phones/{ANA}/inbox", c.netsim) }] });
    assert_eq!(cw.post_hook(&sneaky).await, 200);
    held(&cw, 1, |m| m.private && m.content.as_deref().is_some_and(|t| t.starts_with("Not sent to WhatsApp"))).await;
    assert_eq!(inbox(&c, ANA).await.len(), 2, "nothing more went out");

    // A message sent through the API shows in the conversation as outgoing, once.
    let own = c.api.client(Some(token));
    own.post(&format!("/v1/instances/{id}/messages"), &json!({ "to": ANA, "type": "text", "text": "sent by the API" }))
        .await
        .expect(202);
    held(&cw, 1, |m| m.content.as_deref() == Some("sent by the API")).await;
    let api_sent =
        cw.messages().into_iter().filter(|m| m.content.as_deref() == Some("sent by the API")).collect::<Vec<_>>();
    assert_eq!(api_sent.len(), 1);
    assert_eq!((api_sent[0].conversation_id, api_sent[0].message_type.as_str()), (conv, "outgoing"));
    assert!(api_sent[0].source_id.as_deref().is_some_and(|s| s.starts_with("WAID:")));

    // A group: its own conversation, each message naming its sender.
    let group = c
        .api
        .admin()
        .post(&format!("/v1/instances/{id}/groups"), &json!({ "subject": "Team", "participants": [BEN] }))
        .await
        .expect(201);
    let gjid = group["jid"].as_str().unwrap().to_string();
    say(&c, BEN, &gjid, json!({ "text": "morning all" })).await;
    held(&cw, 1, |m| m.content.as_deref().is_some_and(|t| t.ends_with("morning all"))).await;
    let gm =
        cw.messages().into_iter().find(|m| m.content.as_deref().is_some_and(|t| t.ends_with("morning all"))).unwrap();
    assert_eq!(gm.content.as_deref(), Some(format!("**+{BEN}:**\nmorning all").as_str()));
    assert_ne!(gm.conversation_id, conv);
    assert!(cw.contacts().iter().any(|c| c.2 == gjid && c.1.ends_with("(group)")));

    // An agent starts a conversation in Chatwoot with a contact known by a number with no
    // WhatsApp account: the send fails, and the agents are told in a private note.
    let inbox_id = cw.inboxes()[0].0;
    let lost = cw.seed_conversation(inbox_id, "+5511999990404");
    cw.agent_reply(lost, "anyone there?", vec![]).await;
    held(&cw, 1, |m| m.private && m.conversation_id == lost).await;
    let note = cw.messages().into_iter().find(|m| m.private && m.conversation_id == lost).unwrap();
    assert!(note.content.as_deref().unwrap().starts_with("Not delivered to WhatsApp"), "{note:?}");

    assert!(!cw.messages().iter().any(|m| m.content.as_deref().is_some_and(|t| t.contains("forged"))));
    let forged = logged(&pool, &id, &first).await;
    assert_eq!(forged["text"], "hi, are you open today?");
    // The repeated deletion and the forged edit wrote no event.
    let kinds: Vec<String> = sqlx::query_scalar(
        "SELECT type FROM outbox WHERE instance_id = $1 AND type IN ('message.edited', 'message.deleted') ORDER BY id",
    )
    .bind(&id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(kinds, ["message.edited", "message.deleted"]);
    harness::events::check_emitted(&pool).await;

    // Everything the double saw is what Chatwoot's description allows.
    let problems = cw.validate();
    assert!(problems.is_empty(), "{problems:#?}");
    let shown = c.api.admin().get(&format!("/v1/instances/{id}/chatwoot")).await.expect(200);
    assert_eq!(shown["pending_jobs"], 0);
    assert_eq!(shown["failed_jobs"], 0);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chatwoot_failing_and_down_and_pods_killed_lose_nothing_and_post_nothing_twice() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let cw = ChatwootDouble::start().await;
    // The relay in this process; the bridge as two pods, one of them killed mid-way.
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(config(&c), stop.clone()));
    let mut pods = pods(&c, 2);
    setup(&c, &cw).await;
    // Ben is in Chatwoot already, by his number, from another integration: he is used.
    let ben = cw.seed_contact("Ben (CRM)", "crm-17", &format!("+{BEN}"));
    // Chatwoot acts and then fails (the bridge cannot know it acted), fails outright,
    // answers slowly, and then is down for a while.
    cw.faults(&[Fault::FailAfter, Fault::Fail, Fault::FailAfter, Fault::Fail, Fault::FailAfter]);
    cw.set_delay(Duration::from_millis(300));
    let mut sent = Vec::new();
    for i in 0..12 {
        let (from, text) = if i % 2 == 0 { (ANA, format!("ana {i}")) } else { (BEN, format!("ben {i}")) };
        sent.push((say(&c, from, SHOP, json!({ "text": text })).await, text));
        if i == 3 {
            // A pod dies as it works (kill -9: its claim lapses for the other).
            held(&cw, 1, |m| !m.private).await;
            let mut gone = pods.0.remove(0);
            gone.kill().unwrap();
            gone.wait().unwrap();
        }
        if i == 7 {
            cw.set_down(true);
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    cw.set_down(false);
    cw.set_delay(Duration::ZERO);
    held(&cw, 12, |m| !m.private).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let msgs = cw.messages();
    for (wa, text) in &sent {
        let copies = msgs.iter().filter(|m| m.source_id.as_deref() == Some(&format!("WAID:{wa}"))).count();
        assert_eq!(copies, 1, "{text} is in Chatwoot once: {msgs:#?}");
    }
    assert_eq!(cw.contacts().len(), 2, "one contact each");
    assert!(cw.conversations().iter().any(|v| v.2 == ben), "Ben's conversation is with his contact");
    assert_eq!(cw.conversations().len(), 2, "one conversation each");
    // In order within each conversation.
    for who in ["ana", "ben"] {
        let order: Vec<String> = msgs.iter().filter_map(|m| m.content.clone()).filter(|t| t.starts_with(who)).collect();
        let want: Vec<String> = sent.iter().map(|s| s.1.clone()).filter(|t| t.starts_with(who)).collect();
        assert_eq!(order, want);
    }
    let problems = cw.validate();
    assert!(problems.is_empty(), "{problems:#?}");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_brings_the_logs_chats_and_recent_history_once() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let cw = ChatwootDouble::start().await;
    let stop = bridge(&c);
    for n in [SHOP, ANA, BEN] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("shop", SHOP).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    // History before any inbox: two contacts write, and the account answers one.
    say(&c, ANA, SHOP, json!({ "text": "before 1" })).await;
    say(&c, BEN, SHOP, json!({ "text": "ben before" })).await;
    say(&c, ANA, SHOP, json!({ "text": "before 2" })).await;
    own.post(&format!("/v1/instances/{id}/messages"), &json!({ "to": ANA, "type": "text", "text": "api before" }))
        .await
        .expect(202);
    let pool = c.pool().await;
    wait_for(Duration::from_secs(30), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM log_messages WHERE instance_id = $1")
            .bind(&id)
            .fetch_one(&pool)
            .await
            .unwrap();
        (n == 4).then_some(())
    })
    .await
    .expect("the log holds the history");

    let path = format!("/v1/instances/{id}/chatwoot");
    let body = json!({ "url": cw.url(), "account_id": 1, "token": TOKEN, "allow_private_targets": true,
        "import_contacts": true, "import_messages": true, "import_days": 1 });
    c.api.admin().put(&path, &body).await.expect(200);
    held(&cw, 4, |m| !m.private).await;
    // The same settings again import nothing more; a live message comes after the history.
    c.api.admin().put(&path, &body).await.expect(200);
    say(&c, ANA, SHOP, json!({ "text": "after" })).await;
    held(&cw, 5, |m| !m.private).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let msgs = cw.messages();
    let texts: Vec<String> = msgs.iter().filter_map(|m| m.content.clone()).collect();
    assert_eq!(texts.len(), 5, "each message once: {texts:?}");
    let ana = msgs.iter().find(|m| m.content.as_deref() == Some("before 1")).unwrap().conversation_id;
    let in_ana: Vec<(String, String)> = msgs
        .iter()
        .filter(|m| m.conversation_id == ana)
        .map(|m| (m.content.clone().unwrap(), m.message_type.clone()))
        .collect();
    let want = [("before 1", "incoming"), ("before 2", "incoming"), ("api before", "outgoing"), ("after", "incoming")];
    assert_eq!(in_ana, want.map(|(t, k)| (t.to_string(), k.to_string())));
    assert_eq!(cw.contacts().len(), 2);
    assert_eq!(cw.conversations().len(), 2);
    let shown = c.api.admin().get(&path).await.expect(200);
    assert_eq!((shown["import_messages"].clone(), shown["pending_jobs"].clone()), (json!(true), json!(0)));
    let problems = cw.validate();
    assert!(problems.is_empty(), "{problems:#?}");
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accounts_settings_give_each_of_its_instances_an_inbox() {
    const SHOP2: &str = "5511977780009";
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let cw = ChatwootDouble::start().await;
    let stop = bridge(&c);
    for n in [SHOP, SHOP2, ANA] {
        c.phone(n, false).await;
    }
    let admin = c.api.admin();
    let created = admin.post("/v1/accounts", &json!({ "name": "Acme" })).await.expect(201);
    let acct = created["account"]["id"].as_str().unwrap().to_string();
    let acct_token = created["token"].as_str().unwrap().to_string();
    let customer = c.api.client(Some(acct_token));
    let (one, one_token) = c.paired_instance("shop-one", SHOP).await;
    let (two, _) = c.paired_instance("shop-two", SHOP2).await;
    for i in [&one.id, &two.id] {
        admin.put(&format!("/v1/instances/{i}/account"), &json!({ "account_id": acct })).await.expect(204);
    }
    let path = format!("/v1/accounts/{acct}/chatwoot");
    let body = json!({ "url": cw.url(), "account_id": 1, "token": TOKEN });
    customer.get(&path).await.expect_error(404, "not_found");
    // The customer sets its own Chatwoot (loopback here: the admin allows it).
    customer.put(&path, &body).await.expect_error(400, "validation_failed");
    let mut named = body.clone();
    named["inbox_id"] = json!(3);
    named["allow_private_targets"] = json!(true);
    admin.put(&path, &named).await.expect_error(400, "validation_failed");
    let mut private = body.clone();
    private["allow_private_targets"] = json!(true);
    let shown = admin.put(&path, &private).await.expect(200);
    assert_eq!((shown["instances"].clone(), shown["token_set"].clone()), (json!(2), json!(true)));
    assert!(!customer.get(&path).await.text.contains(TOKEN));
    // The customer may change the rest; the admin's allowance and the token stay.
    let patched = customer.patch(&path, &json!({ "sign_messages": false })).await.expect(200);
    assert_eq!(patched["allow_private_targets"], true);

    // Each instance gets its own inbox, named after it.
    wait_for(Duration::from_secs(30), || async { (cw.inboxes().len() == 2).then_some(()) }).await.expect("two inboxes");
    let mut names: Vec<String> = cw.inboxes().into_iter().map(|i| i.1).collect();
    names.sort();
    assert_eq!(names, ["shop-one", "shop-two"]);
    let inst = admin.get(&format!("/v1/instances/{}/chatwoot", one.id)).await.expect(200);
    assert_eq!(inst["from_account"], acct.as_str());
    say(&c, ANA, SHOP, json!({ "text": "to one" })).await;
    say(&c, ANA, SHOP2, json!({ "text": "to two" })).await;
    held(&cw, 2, |m| !m.private).await;
    let convs = cw.conversations();
    let inbox_of = |text: &str| {
        let m = cw.messages().into_iter().find(|m| m.content.as_deref() == Some(text)).unwrap();
        convs.iter().find(|v| v.0 == m.conversation_id).unwrap().1
    };
    assert_ne!(inbox_of("to one"), inbox_of("to two"));

    // An instance with settings of its own keeps them; one that leaves the account loses
    // its inbox; removing the account's settings removes the rest.
    let own =
        json!({ "url": cw.url(), "account_id": 1, "token": TOKEN, "allow_private_targets": true, "enabled": false });
    // The admin's allowance for the account's Chatwoot is not the instance owner's to keep.
    let owner = c.api.client(Some(one_token));
    owner.put(&format!("/v1/instances/{}/chatwoot", one.id), &own).await.expect_error(403, "forbidden");
    admin.put(&format!("/v1/instances/{}/chatwoot", one.id), &own).await.expect(200);
    customer.patch(&path, &json!({ "sign_messages": true })).await.expect(200);
    let shown = admin.get(&format!("/v1/instances/{}/chatwoot", one.id)).await.expect(200);
    assert_eq!((shown["from_account"].clone(), shown["enabled"].clone()), (Value::Null, json!(false)));
    admin.put(&format!("/v1/instances/{}/account", two.id), &json!({ "account_id": null })).await.expect(204);
    say(&c, ANA, SHOP2, json!({ "text": "after leaving" })).await;
    wait_for(Duration::from_secs(30), || async {
        let r = admin.get(&format!("/v1/instances/{}/chatwoot", two.id)).await;
        (r.status == 404).then_some(())
    })
    .await
    .expect("the inbox goes with the account");
    customer.delete(&path).await.expect(204);
    admin.get(&format!("/v1/instances/{}/chatwoot", one.id)).await.expect(200);
    let problems = cw.validate();
    assert!(problems.is_empty(), "{problems:#?}");
    stop.cancel();
}

/// Whether the bridge's consumer is on the events stream.
async fn consumer_exists(c: &Cluster) -> bool {
    let nats = async_nats::connect(&c.config.nats_url).await.unwrap();
    let js = async_nats::jetstream::new(nats);
    let stream = js.get_stream(shared::bus::Subjects::new(&c.config).events_stream()).await.unwrap();
    stream.consumer_info(chatwoot::CONSUMER).await.is_ok()
}

async fn consumer_becomes(c: &Cluster, there: bool, why: &str) {
    wait_for(Duration::from_secs(30), || async { (consumer_exists(c).await == there).then_some(()) })
        .await
        .unwrap_or_else(|| panic!("{why}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_reads_the_event_stream_only_while_chatwoot_is_set() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let cw = ChatwootDouble::start().await;
    // A consumer left by an earlier build, with no instance or account set up.
    let subjects = shared::bus::Subjects::new(&c.config);
    let nats = async_nats::connect(&c.config.nats_url).await.unwrap();
    let js = async_nats::jetstream::new(nats.clone());
    shared::bus::ensure_events_stream(&js, &subjects, c.config.events.stream_max_bytes).await.unwrap();
    let stale = async_nats::jetstream::consumer::pull::Config {
        durable_name: Some(chatwoot::CONSUMER.to_string()),
        filter_subjects: vec![subjects.events_filter(None, Some("message.received"))],
        ..Default::default()
    };
    shared::bus::events_consumer(&nats, &subjects, stale, Duration::from_secs(10)).await.unwrap();
    assert!(consumer_exists(&c).await);
    let stop = bridge(&c);
    consumer_becomes(&c, false, "with no chatwoot settings the consumer is removed").await;

    // An inbox set: the consumer is made, and what the contact wrote reaches Chatwoot.
    let (id, _) = setup(&c, &cw).await;
    say(&c, ANA, SHOP, json!({ "text": "anyone there?" })).await;
    consumer_becomes(&c, true, "an inbox makes the consumer").await;
    held(&cw, 1, |m| m.content.as_deref() == Some("anyone there?")).await;

    // The last inbox removed: the consumer goes again.
    c.api.admin().delete(&format!("/v1/instances/{id}/chatwoot")).await.expect(204);
    consumer_becomes(&c, false, "the last inbox removed takes the consumer").await;
    let problems = cw.validate();
    assert!(problems.is_empty(), "{problems:#?}");
    stop.cancel();
}
