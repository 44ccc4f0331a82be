//! Hidden ids (LIDs) on netsim: a contact the network first names only by LID, then by
//! LID with the number beside it, then by LID alone again. The log keeps one chat (under
//! the LID until the number is learned, merged into the number's then, and found by the
//! LID afterwards); every event, both webhook formats, the chat list and the Chatwoot
//! contact carry the number beside the LID; sends to the LID reach the contact and land
//! in the same chat. A second contact, written to by number first, has a chat under the
//! number and one under the LID until the pair is learned: then they are merged.

use std::time::Duration;

use harness::chatwoot::{ChatwootDouble, TOKEN};
use harness::cluster::{wait_for, Cluster};
use harness::webhooks::WebhookSink;
use serde_json::{json, Value};

use crate::bin;
use crate::chatwoot::{bridge, held, say};

const SHOP: &str = "5511977790001";
const ANA: &str = "5511977790002";
const BEN: &str = "5511977790003";

/// The data of the first event of `kind` (our format) whose `f` holds.
async fn event(sink: &WebhookSink, kind: &str, f: impl Fn(&Value) -> bool) -> Value {
    let found = wait_for(Duration::from_secs(30), || async {
        sink.received().iter().map(|r| r.json()).find(|e| e["type"] == kind && f(&e["data"])).map(|e| e["data"].clone())
    })
    .await;
    found.unwrap_or_else(|| {
        panic!("a {kind} event: {:#?}", sink.received().iter().map(|r| r.json()).collect::<Vec<_>>())
    })
}

/// The `data` of Evolution's `messages.upsert` for the message `text`.
async fn upsert(sink: &WebhookSink, text: &str) -> Value {
    let found = wait_for(Duration::from_secs(30), || async {
        sink.received()
            .iter()
            .map(|r| r.json())
            .find(|e| e["event"] == "messages.upsert" && e["data"]["message"]["conversation"] == text)
            .map(|e| e["data"].clone())
    })
    .await;
    found.unwrap_or_else(|| panic!("messages.upsert for {text:?}"))
}

fn text_is(t: &'static str) -> impl Fn(&Value) -> bool {
    move |d: &Value| d["content"]["text"] == t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contact_named_by_lid_then_by_number_is_one_chat_with_the_number_beside_the_lid() {
    let c = Cluster::start(bin(), 1, |config| config.allow_private_targets = true).await;
    let cw = ChatwootDouble::start().await;
    let stop = bridge(&c);
    for n in [SHOP, ANA] {
        c.phone(n, false).await;
    }
    let (inst, token) = c.paired_instance("lids", SHOP).await;
    let id = inst.id.to_string();
    let own = c.api.client(Some(token));
    let ours = WebhookSink::start().await;
    let evo = WebhookSink::start().await;
    let hooks = format!("/v1/instances/{id}/webhooks");
    own.post(&hooks, &json!({ "url": ours.url() })).await.expect(201);
    own.post(&hooks, &json!({ "url": evo.url(), "format": "evolution" })).await.expect(201);
    own.put(&format!("/v1/instances/{id}/chatwoot"), &json!({ "url": cw.url(), "account_id": 1, "token": TOKEN }))
        .await
        .expect(200);
    wait_for(Duration::from_secs(30), || async { (cw.inboxes().len() == 1).then_some(()) }).await.expect("an inbox");

    let addressing = |mode: &'static str| {
        let net = c.netsim();
        async move { net.post(&format!("/control/phones/{ANA}/addressing"), &json!({ "mode": mode })).await.expect(200) }
    };
    let lid = format!("{}@lid", addressing("lid_hidden").await["lid"].as_str().unwrap());
    let pn = format!("{ANA}@s.whatsapp.net");

    // 1. By LID alone: the chat is the LID's; nothing names the number.
    let who = say(&c, ANA, SHOP, json!({ "text": "who am I?" })).await;
    let d = event(&ours, "message.received", text_is("who am I?")).await;
    assert_eq!((d["chat_jid"].as_str(), d["chat_lid"].as_str()), (Some(lid.as_str()), Some(lid.as_str())));
    assert_eq!((d["from_jid"].as_str(), d["from_lid"].as_str()), (Some(lid.as_str()), Some(lid.as_str())));
    let k = &upsert(&evo, "who am I?").await["key"];
    assert_eq!(k["remoteJid"], lid.as_str());
    assert_eq!(k["addressingMode"], "lid");
    assert!(k.get("remoteJidAlt").is_none(), "{k}");
    held(&cw, 1, |m| m.content.as_deref() == Some("who am I?")).await;
    let contacts = cw.contacts();
    assert_eq!(contacts.len(), 1);
    let (contact, _, identifier, phone) = contacts[0].clone();
    assert_eq!((identifier.as_str(), phone), (lid.as_str(), None));
    assert_eq!(cw.contact_attributes()[&contact]["lid"], lid.as_str());
    let chats = own.get(&format!("/v1/instances/{id}/chats")).await.expect(200);
    assert_eq!(chats["chats"].as_array().unwrap().len(), 1);
    assert_eq!((chats["chats"][0]["jid"].as_str(), chats["chats"][0]["lid"].as_str()), (Some(&*lid), Some(&*lid)));

    // An agent answers in that conversation: it goes to the LID, and the contact gets it.
    let conv = cw.conversations()[0].0;
    let (_, status) = cw.agent_reply(conv, "Hello, stranger", vec![]).await;
    assert_eq!(status, 200);
    wait_for(Duration::from_secs(30), || async {
        let inbox = c.netsim().get(&format!("/control/phones/{ANA}/inbox")).await.expect(200);
        inbox["messages"].as_array().unwrap().iter().any(|m| m["from"] == SHOP).then_some(())
    })
    .await
    .expect("the contact gets the agent's answer through its hidden id");

    // 2. By LID with the number: the pair is learned, the LID's chat (both messages) is
    //    merged into the number's, and the Chatwoot contact takes the number.
    addressing("lid").await;
    say(&c, ANA, SHOP, json!({ "text": "it is Ana" })).await;
    let d = event(&ours, "message.received", text_is("it is Ana")).await;
    assert_eq!((d["chat_jid"].as_str(), d["chat_lid"].as_str()), (Some(pn.as_str()), Some(lid.as_str())));
    assert_eq!((d["from_jid"].as_str(), d["from_lid"].as_str()), (Some(pn.as_str()), Some(lid.as_str())));
    let gone = event(&ours, "chat.updated", |d| d["jid"] == lid.as_str() && d["deleted"] == true).await;
    assert_eq!(gone["lid"], lid.as_str());
    event(&ours, "chat.updated", |d| d["jid"] == pn.as_str() && d["lid"] == lid.as_str()).await;
    let k = &upsert(&evo, "it is Ana").await["key"];
    assert_eq!((k["remoteJid"].as_str(), k["remoteJidAlt"].as_str()), (Some(pn.as_str()), Some(lid.as_str())));
    assert_eq!(k["addressingMode"], "pn");
    held(&cw, 1, |m| m.content.as_deref() == Some("it is Ana")).await;
    assert_eq!(cw.contacts().len(), 1, "the same contact");
    let (_, _, identifier, phone) = cw.contacts()[0].clone();
    assert_eq!((identifier.as_str(), phone.as_deref()), (pn.as_str(), Some(format!("+{ANA}").as_str())));
    assert_eq!(cw.contact_attributes()[&contact]["lid"], lid.as_str());
    assert_eq!(cw.conversations().len(), 1, "the same conversation");
    assert!(cw.messages().iter().all(|m| m.conversation_id == conv));

    // 3. By LID alone again: the instance knows the number now.
    addressing("lid_hidden").await;
    say(&c, ANA, SHOP, json!({ "text": "hidden again" })).await;
    let d = event(&ours, "message.received", text_is("hidden again")).await;
    assert_eq!((d["chat_jid"].as_str(), d["chat_lid"].as_str()), (Some(pn.as_str()), Some(lid.as_str())));
    held(&cw, 1, |m| m.content.as_deref() == Some("hidden again")).await;
    assert_eq!(cw.conversations().len(), 1);

    // A send to the LID: delivered, and logged in the number's chat.
    let sent = own
        .post(&format!("/v1/instances/{id}/messages"), &json!({ "to": lid, "type": "text", "text": "by lid" }))
        .await
        .expect(202);
    let msg = sent["id"].as_str().unwrap().to_string();
    event(&ours, "message.sent", |d| d["id"] == msg.as_str()).await;

    // One chat, every message in it, the number beside the LID.
    let all = wait_for(Duration::from_secs(30), || async {
        let page = own.get(&format!("/v1/instances/{id}/chats/{pn}/messages?limit=50")).await.expect(200);
        let msgs = page["messages"].as_array().unwrap().clone();
        (msgs.len() >= 5).then_some(msgs)
    })
    .await
    .expect("the number's chat holds every message");
    let texts: Vec<&str> = all.iter().filter_map(|m| m["content"]["text"].as_str()).collect();
    for t in ["who am I?", "it is Ana", "hidden again", "by lid"] {
        assert!(texts.contains(&t), "{t} in {texts:?}");
    }
    assert!(texts.iter().any(|t| t.ends_with("Hello, stranger")), "{texts:?}");
    let chats = own.get(&format!("/v1/instances/{id}/chats")).await.expect(200);
    let list = chats["chats"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:#?}");
    assert_eq!((list[0]["jid"].as_str(), list[0]["lid"].as_str()), (Some(&*pn), Some(&*lid)));

    // Ana, by number alone now, edits her first message (logged under her LID): hers
    // all the same.
    addressing("pn").await;
    let edit = json!({ "type": "edit", "text": "who am I? (Ana)", "body": { "target": who } });
    say(&c, ANA, SHOP, edit).await;
    let d = event(&ours, "message.edited", |d| d["wa_message_id"] == who.as_str()).await;
    assert_eq!((d["chat_jid"].as_str(), d["text"].as_str()), (Some(pn.as_str()), Some("who am I? (Ana)")));

    // Ben: the shop wrote to his number first, then he writes by LID alone (a second
    // chat), then by LID with his number: the LID's chat merges into the number's, unread
    // counts adding up.
    c.phone(BEN, false).await;
    let messages = format!("/v1/instances/{id}/messages");
    let welcome = own.post(&messages, &json!({ "to": BEN, "type": "text", "text": "welcome" })).await.expect(202);
    let welcome = welcome["id"].as_str().unwrap().to_string();
    event(&ours, "message.sent", |d| d["id"] == welcome.as_str()).await;
    let net = c.netsim();
    let ben_lid = net.post(&format!("/control/phones/{BEN}/addressing"), &json!({ "mode": "lid_hidden" })).await;
    let ben_lid = format!("{}@lid", ben_lid.expect(200)["lid"].as_str().unwrap());
    let ben = format!("{BEN}@s.whatsapp.net");
    say(&c, BEN, SHOP, json!({ "text": "ben, hidden" })).await;
    event(&ours, "message.received", text_is("ben, hidden")).await;
    let chats = own.get(&format!("/v1/instances/{id}/chats")).await.expect(200);
    let of = |list: &Value, jid: &str| list["chats"].as_array().unwrap().iter().find(|c| c["jid"] == jid).cloned();
    assert!(of(&chats, &ben).is_some() && of(&chats, &ben_lid).is_some(), "two chats for now: {chats:#}");
    net.post(&format!("/control/phones/{BEN}/addressing"), &json!({ "mode": "lid" })).await.expect(200);
    say(&c, BEN, SHOP, json!({ "text": "ben, known" })).await;
    event(&ours, "message.received", text_is("ben, known")).await;
    let chats = own.get(&format!("/v1/instances/{id}/chats")).await.expect(200);
    assert!(of(&chats, &ben_lid).is_none(), "merged: {chats:#}");
    let merged = of(&chats, &ben).expect("the number's chat");
    assert_eq!((merged["lid"].as_str(), merged["unread_count"].as_i64()), (Some(ben_lid.as_str()), Some(2)));
    let page = own.get(&format!("/v1/instances/{id}/chats/{ben}/messages")).await.expect(200);
    let texts: Vec<&str> =
        page["messages"].as_array().unwrap().iter().filter_map(|m| m["content"]["text"].as_str()).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");

    let problems = cw.validate();
    assert!(problems.is_empty(), "{problems:#?}");
    stop.cancel();
}
