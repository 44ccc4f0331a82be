//! Evolution Manager v2 (Evolution's web UI, `EvolutionAPI/evolution-manager-v2`) against
//! paceline: the calls it makes, in its order, with the headers it sends (`apikey`: the
//! global key typed at sign-in, then each instance's own token as `fetchInstances` shows
//! it) and the fields its screens read. The manager is not on a registry, so this walks
//! its calls as its sources make them (src/lib/queries/**: login, instance list,
//! dashboard, QR, chat list and chat, send, settings, webhook, proxy, and the integration
//! pages), from a browser origin the deployment allows (CORS).

use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use harness::Client;
use serde_json::{json, Value};

use crate::bin;

const SHOP: &str = "5511955560001";
const FRIEND: &str = "5511955560002";
const ORIGIN: &str = "https://manager.example.com";

/// The manager's client: `apikey` only (never `Authorization`), from its origin.
fn manager(c: &Cluster, key: &str) -> Client {
    let mut m = c.api.anon().with_header("origin", ORIGIN);
    if !key.is_empty() {
        m = m.with_header("apikey", key);
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evolution_managers_calls_sign_in_list_pair_chat_and_configure() {
    let c = Cluster::start(bin(), 1, |cfg| {
        cfg.api.cors_allowed_origins = vec![ORIGIN.into()];
    })
    .await;
    c.phone(SHOP, false).await;
    c.phone(FRIEND, false).await;
    // The shop's phone has a profile name, which its session reports when it links.
    let named = json!({ "op": "set_profile", "push_name": "Shop Ltd" });
    c.netsim().post(&format!("/control/phones/{SHOP}/ops"), &named).await.expect(200);
    let admin_key = c.api.config.admin_token.clone().unwrap();
    let anon = manager(&c, "");

    // 1. Sign-in: the root document (no key; `version` required, `clientName` shown),
    //    then the key checked; a wrong key is refused.
    let root = anon.get("/").await;
    assert_eq!(root.status, 200);
    assert_eq!(root.headers["access-control-allow-origin"], ORIGIN, "a browser may read it");
    assert!(root.body["version"].as_str().is_some_and(|v| !v.is_empty()), "{}", root.text);
    assert_eq!(root.body["clientName"], "paceline");
    let creds = manager(&c, &admin_key).post("/verify-creds", &json!({})).await.expect(200);
    assert_eq!(creds["status"], 200, "a non-empty answer signs in: {creds}");
    manager(&c, "pl_admin_wrongwrongwrongwrongwrong").post("/verify-creds", &json!({})).await.expect(401);
    // Its calls carry `apikey` and JSON: the browser asks first, without a key.
    let pre = c
        .api
        .anon()
        .send(
            c.api
                .anon()
                .request(reqwest::Method::OPTIONS, "/instance/fetchInstances")
                .header("origin", ORIGIN)
                .header("access-control-request-method", "GET")
                .header("access-control-request-headers", "apikey,content-type"),
        )
        .await;
    assert!(pre.status < 300, "preflight: {} {}", pre.status, pre.text);
    assert_eq!(pre.headers["access-control-allow-origin"], ORIGIN);
    let allowed = pre.headers["access-control-allow-headers"].to_str().unwrap().to_ascii_lowercase();
    assert!(allowed.contains("apikey") && allowed.contains("content-type"), "{allowed}");
    // Another origin is not allowed.
    let other = c.api.anon().with_header("origin", "https://evil.example").get("/").await;
    assert!(!other.headers.contains_key("access-control-allow-origin"));

    // 2. The instance list (global key): an array, each with its token (so every
    //    instance screen can send it), its counts and its state.
    let (inst, token) = c.paired_instance("manager-shop", SHOP).await;
    let id = inst.id.to_string();
    let global = manager(&c, &admin_key);
    let list = global.get("/instance/fetchInstances").await.expect(200);
    let shop = list.as_array().unwrap().iter().find(|i| i["name"] == "manager-shop").expect("listed").clone();
    assert_eq!(shop["id"], id.as_str());
    assert_eq!(shop["token"], token.as_str(), "the admin is shown the instance's token again");
    assert_eq!(shop["connectionStatus"], "open");
    assert_eq!(shop["ownerJid"], format!("{SHOP}@s.whatsapp.net"));
    assert_eq!(shop["number"], SHOP);
    assert_eq!(shop["profileName"], "Shop Ltd", "the name the session reported");
    assert_eq!(inst.push_name.as_deref(), Some("Shop Ltd"));
    for k in ["Message", "Contact", "Chat"] {
        assert!(shop["_count"][k].is_i64(), "_count.{k}: {shop}");
    }

    // 3. The dashboard: the instance by id (its `[0]`), with the global key.
    let one = global.get(&format!("/instance/fetchInstances?instanceId={id}")).await.expect(200);
    assert_eq!(one.as_array().unwrap().len(), 1);
    assert_eq!(one[0]["name"], "manager-shop");
    // From here on the manager sends the instance's token.
    let own = manager(&c, shop["token"].as_str().unwrap());
    // A new name (the settings' profile form) is what the list shows from then on.
    own.post("/chat/updateProfileName/manager-shop", &json!({ "name": "Shop & Co" })).await.expect(200);
    let renamed = global.get(&format!("/instance/fetchInstances?instanceId={id}")).await.expect(200);
    assert_eq!(renamed[0]["profileName"], "Shop & Co");

    // 4. A friend writes; the chat list shows the chat, the header finds it by
    //    `where.remoteJid`, the chat's messages by `where.key.remoteJid`.
    let friend_jid = format!("{FRIEND}@s.whatsapp.net");
    c.netsim()
        .post(&format!("/control/phones/{FRIEND}/messages"), &json!({ "to": SHOP, "text": "hello shop" }))
        .await
        .expect(201);
    let chats = wait_for(Duration::from_secs(20), || async {
        let r = own.post("/chat/findChats/manager-shop", &json!({ "where": {} })).await.expect(200);
        r.as_array().is_some_and(|a| !a.is_empty()).then_some(r)
    })
    .await
    .expect("the chat appears");
    for chat in chats.as_array().unwrap() {
        assert!(chat["remoteJid"].is_string(), "every chat has its remoteJid: {chat}");
    }
    let header = own.post("/chat/findChats/manager-shop", &json!({ "where": { "remoteJid": friend_jid } })).await;
    let header = header.expect(200);
    assert_eq!(header[0]["remoteJid"], friend_jid.as_str(), "{header}");
    let found = own
        .post("/chat/findMessages/manager-shop", &json!({ "where": { "key": { "remoteJid": friend_jid } } }))
        .await
        .expect(200);
    let records = found["messages"]["records"].as_array().expect("records");
    assert!(!records.is_empty());
    for m in records {
        assert!(m["key"]["id"].is_string() && m["key"]["fromMe"].is_boolean(), "{m}");
        assert!(m["messageType"].is_string() && m["messageTimestamp"].is_number(), "{m}");
        assert!(m["key"]["remoteJid"] == friend_jid.as_str(), "only that chat's: {m}");
    }
    assert!(records.iter().any(|m| m["message"]["conversation"] == "hello shop"), "{found}");

    // 5. Send from the chat (the number as the full JID) and with a file (flat base64).
    own.post("/message/sendText/manager-shop", &json!({ "number": friend_jid, "text": "hi from the manager" }))
        .await
        .expect(200);
    own.post(
        "/message/sendMedia/manager-shop",
        &json!({ "number": friend_jid, "mediatype": "document", "mimetype": "application/pdf", "caption": "",
                 "media": "JVBERi0xLjQK", "fileName": "a.pdf" }),
    )
    .await
    .expect(200);
    let counted = wait_for(Duration::from_secs(20), || async {
        let r = global.get(&format!("/instance/fetchInstances?instanceId={id}")).await.expect(200);
        (r[0]["_count"]["Chat"].as_i64() >= Some(1) && r[0]["_count"]["Contact"].as_i64() >= Some(1)).then_some(r)
    })
    .await;
    assert!(counted.is_some(), "the dashboard counts the chat and the contact");

    // 6. Settings, webhook and proxy pages: find, then save what they show.
    let settings = own.get("/settings/find/manager-shop").await.expect(200);
    for k in ["rejectCall", "groupsIgnore", "alwaysOnline", "readMessages", "syncFullHistory", "readStatus"] {
        assert!(settings[k].is_boolean(), "settings.{k}: {settings}");
    }
    let hook = own.get("/webhook/find/manager-shop").await.expect(200);
    assert!(hook.is_null() || hook["events"].is_array(), "a webhook page never gets an object without events: {hook}");
    own.get("/proxy/find/manager-shop").await.expect(200);

    // 7. The Chatwoot page: empty settings, then saved as the page sends them (the token
    // write-only: shown as "", kept when saved again without one).
    let none = own.get("/chatwoot/find/manager-shop").await.expect(200);
    assert_eq!((none["enabled"].clone(), none["url"].clone()), (json!(false), json!("")), "{none}");
    let page = json!({
        "enabled": true, "accountId": "1", "token": "cw-secret-token", "url": "https://8.8.8.8",
        "signMsg": true, "signDelimiter": "\\n", "nameInbox": "", "organization": "", "logo": "",
        "reopenConversation": true, "conversationPending": false, "mergeBrazilContacts": false,
        "importContacts": false, "importMessages": false, "daysLimitImportMessages": 7, "autoCreate": true,
        "ignoreJids": ["@g.us"],
    });
    let saved = own.post("/chatwoot/set/manager-shop", &page).await.expect(200);
    assert_eq!(saved["nameInbox"], "manager-shop");
    let found = own.get("/chatwoot/find/manager-shop").await;
    assert!(!found.text.contains("cw-secret-token"), "the token is never shown");
    let found = found.expect(200);
    assert_eq!(
        (found["enabled"].clone(), found["accountId"].clone(), found["token"].clone()),
        (json!(true), json!("1"), json!(""))
    );
    assert!(found["webhook_url"].as_str().unwrap().contains("/v1/chatwoot/webhook/"), "{found}");
    // The page's `\n` (written out, its default) is a line break, shown written out again.
    assert_eq!(found["signDelimiter"], "\\n");
    let v1 = c.api.admin().get(&format!("/v1/instances/{id}/chatwoot")).await.expect(200);
    assert_eq!(v1["sign_delimiter"], "\n");
    let mut again = found.clone();
    again["signMsg"] = json!(false);
    own.post("/chatwoot/set/manager-shop", &again).await.expect(200);
    let v1 = c.api.admin().get(&format!("/v1/instances/{id}/chatwoot")).await.expect(200);
    assert_eq!(
        (v1["sign_messages"].clone(), v1["groups"].clone(), v1["token_set"].clone()),
        (json!(false), json!(false), json!(true))
    );
    let mut import = page.clone();
    import["importMessages"] = json!(true);
    import["daysLimitImportMessages"] = json!(3);
    let shown = own.post("/chatwoot/set/manager-shop", &import).await.expect(200);
    assert_eq!((shown["importMessages"].clone(), shown["daysLimitImportMessages"].clone()), (json!(true), json!(3)));

    // The other integration pages: none set (`null`, `[]` for bots), and setting one says why not.
    // RabbitMQ: none set; without a broker of the deployment's (rabbitmq.url), the page's
    // save says so (tests/it/rabbitmq.rs has one).
    assert!(own.get("/rabbitmq/find/manager-shop").await.expect(200).is_null());
    let page = json!({ "rabbitmq": { "enabled": true, "events": ["MESSAGES_UPSERT"] } });
    let refused = own.post("/rabbitmq/set/manager-shop", &page).await.expect_error(400, "validation_failed");
    assert!(refused.contains("rabbitmq.url"), "{refused}");
    for page in ["websocket", "sqs"] {
        let r = own.get(&format!("/{page}/find/manager-shop")).await.expect(200);
        assert!(r.is_null(), "{page}: {r}");
        let refused = own
            .post(&format!("/{page}/set/manager-shop"), &json!({ page: { "enabled": true, "events": [] } }))
            .await
            .expect_error(400, "validation_failed");
        assert!(refused.contains("paceline has no"), "{page}: {refused}");
    }
    for bot in ["typebot", "openai", "dify", "flowise", "evolutionBot", "n8n", "evoai"] {
        assert_eq!(own.get(&format!("/{bot}/find/manager-shop")).await.expect(200), json!([]), "{bot}");
        assert_eq!(own.get(&format!("/{bot}/fetchSettings/manager-shop")).await.expect(200), Value::Null, "{bot}");
    }
    own.get("/nonsense/find/manager-shop").await.expect_error(404, "not_found");
    // Another instance's token reaches none of it.
    let (_, other) = c.api.create_instance("manager-other").await;
    manager(&c, &other).get("/chatwoot/find/manager-shop").await.expect_error(404, "instance_not_found");

    // 8. Restart, disconnect and delete as the dashboard and the list do them.
    own.post("/instance/restart/manager-shop", &json!({})).await.expect(200);
    // Disconnect once the session is back (until then: 409, retryable).
    let out = wait_for(Duration::from_secs(20), || async {
        let r = own.delete("/instance/logout/manager-shop").await;
        assert!(r.status == 200 || r.status == 409, "{} {}", r.status, r.text);
        (r.status == 200).then_some(())
    })
    .await;
    assert!(out.is_some(), "logged out after the restart");
    global.delete("/instance/delete/manager-shop").await.expect(200);
}

/// A token made before tokens were sealed (or under another key) is not shown; rotating
/// it gives one that is, and the old one stops working.
#[tokio::test]
async fn a_rotated_token_replaces_the_old_and_is_shown_again() {
    let api = harness::TestApi::start().await;
    let (inst, token) = api.create_instance("rotated").await;
    let id = inst.id.to_string();
    let db = shared::db::connect(&api.config).await.unwrap();
    sqlx::query("UPDATE instances SET token_sealed = NULL WHERE id = $1").bind(&id).execute(&db).await.unwrap();
    let admin_key = api.config.admin_token.clone().unwrap();
    let global = api.anon().with_header("apikey", &admin_key);
    let listed = global.get(&format!("/instance/fetchInstances?instanceId={id}")).await.expect(200);
    assert!(listed[0]["token"].is_null(), "{listed}");
    let new = api.client(Some(token.clone())).post(&format!("/v1/instances/{id}/token"), &json!({})).await.expect(200);
    let new = new["token"].as_str().unwrap().to_string();
    assert!(new.starts_with("pl_inst_") && new != token);
    api.client(Some(token)).get(&format!("/v1/instances/{id}")).await.expect_error(401, "unauthorized");
    api.client(Some(new.clone())).get(&format!("/v1/instances/{id}")).await.expect(200);
    let listed = global.get(&format!("/instance/fetchInstances?instanceId={id}")).await.expect(200);
    assert_eq!(listed[0]["token"], new.as_str());
    // Nobody else rotates it.
    let (_, other) = api.create_instance("rotated-other").await;
    api.client(Some(other)).post(&format!("/v1/instances/{id}/token"), &json!({})).await.expect_error(403, "forbidden");
}
