//! Evolution API v2 compatibility (README, "Coming from Evolution API"): Evolution's own
//! Python client (`evolutionapi` from PyPI, in the test venv, unchanged) creates and
//! connects an instance on netsim, sends every kind it offers, finds the messages, checks
//! numbers, makes a group and changes its members, reads a business account's labels,
//! and receives Evolution-format `messages.upsert` on a webhook set through
//! `webhook/set`. Shapes are Evolution v2's (https://doc.evolution-api.com/v2/api-reference/,
//! and its sources: src/api/routes/*.router.ts, src/api/dto/*.dto.ts).

use std::process::Command;

use harness::cluster::Cluster;
use serde_json::Value;

use crate::bin;

const SHOP: &str = "5511955550001";
const BIZ: &str = "5511955550002";
const FRIEND: &str = "5511955550003";
const NEWBIE: &str = "5511955550004";
const OUTSIDER: &str = "5511955550005";
/// No account has this number.
const NOBODY: &str = "5511955550999";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evolutions_python_client_runs_unchanged_against_netsim() {
    let c = Cluster::start(bin(), 1, |cfg| {
        cfg.allow_private_targets = true;
        // Instances made through instance/create get the deployment's pacing: a second.
        cfg.pacing.default_min_interval_ms = 1_000;
        cfg.pacing.default_max_per_minute = 60;
    })
    .await;
    let stop = shared::Shutdown::new();
    tokio::spawn(dispatcher::run(c.config.clone(), stop.clone()));
    for (n, business) in [(SHOP, false), (BIZ, true), (FRIEND, false), (NEWBIE, false), (OUTSIDER, false)] {
        c.phone(n, business).await;
    }
    let (acct, acct_token) = crate::accounts::account(&c.api, "evo-account", serde_json::json!({})).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/evolution/client.py");
    let mut cmd = Command::new(harness::test_python());
    cmd.arg(script)
        .env("EVO_ACCOUNT", acct_token.token.clone().unwrap())
        .env("EVO_URL", format!("http://{}", c.api.addr))
        .env("EVO_ADMIN", c.api.config.admin_token.clone().unwrap())
        .env("NETSIM", format!("http://{}", c.netsim))
        .env("SHOP", SHOP)
        .env("BIZ", BIZ)
        .env("FRIEND", FRIEND)
        .env("NEWBIE", NEWBIE)
        .env("OUTSIDER", OUTSIDER)
        .env("NOBODY", NOBODY);
    let out = tokio::task::spawn_blocking(move || cmd.output()).await.unwrap().expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the Evolution client failed:\n{stderr}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    let friend_jid = format!("{FRIEND}@s.whatsapp.net");

    // 1. instance/create (global key): Evolution's `instance`, the token in `hash`, and
    //    with `qrcode: true` the QR (`code`, `base64` PNG); connectionState turns `open`.
    assert_eq!(r["create"]["instance"]["instanceName"], "evo-shop", "{}", r["create"]);
    assert_eq!(r["create"]["instance"]["integration"], "WHATSAPP-BAILEYS");
    assert!(r["create"]["instance"]["instanceId"].as_str().unwrap().starts_with("inst_"));
    assert_eq!(r["create"]["hash_prefix"], "pl_inst_");
    assert!(r["create"]["qrcode"]["base64"].as_str().unwrap().starts_with("data:image/png;base64,"));
    assert_eq!(
        r["connection_state"],
        serde_json::json!({ "instance": { "instanceName": "evo-shop", "state": "open" } })
    );
    // fetchInstances: all with the global key, its own with an instance token; 401 otherwise.
    let fetched = r["fetch_admin"].as_array().unwrap();
    let shop = fetched.iter().find(|i| i["name"] == "evo-shop").expect("listed");
    assert_eq!(shop["connectionStatus"], "open");
    assert_eq!(shop["ownerJid"], format!("{SHOP}@s.whatsapp.net"));
    assert!(
        shop["token"].as_str().is_some_and(|t| t.starts_with("pl_inst_")),
        "the admin is shown the token again (sealed at rest): {shop}"
    );
    assert_eq!(r["fetch_own"].as_array().unwrap().len(), 1);
    // An account's token: created inside the account, and only its own listed.
    assert_eq!(r["account_fetch"], serde_json::json!(["evo-account"]), "{}", r["account_fetch"]);
    let made = r["account_create"]["instanceId"].as_str().unwrap();
    let held = c.api.admin().get(&format!("/v1/instances/{made}")).await.expect(200);
    assert_eq!(held["account_id"], acct.as_str());
    assert_eq!(r["bad_key"], "EvolutionAuthenticationError");

    // 2. Sends: ours (serviceId, messageId) beside Evolution's record, queued (PENDING).
    let sends = &r["sends"];
    for (kind, message_type) in [
        ("text", "conversation"),
        ("media_file", "imageMessage"),
        ("media_base64", "documentMessage"),
        ("location", "locationMessage"),
        ("contact", "contactMessage"),
        ("poll", "pollCreationMessage"),
        ("reaction", "reactionMessage"),
    ] {
        let s = &sends[kind];
        assert_eq!(s["messageType"], message_type, "{kind}: {s}");
        assert_eq!(s["status"], "PENDING", "{kind}");
        assert_eq!(s["key"]["fromMe"], true);
        assert_eq!(s["key"]["id"], s["messageId"], "{kind}");
        assert_eq!(s["key"]["remoteJid"], friend_jid, "{kind}");
        assert_eq!(s["serviceId"].as_str().unwrap().len(), 36, "{kind}");
        assert!(s["messageTimestamp"].as_i64().unwrap() > 1_700_000_000);
    }
    assert_eq!(sends["text"]["message"], serde_json::json!({ "conversation": "Hello from Evolution" }));
    assert_eq!(sends["media_file"]["message"]["imageMessage"]["mimetype"], "image/png");
    assert_eq!(sends["media_file"]["message"]["imageMessage"]["caption"], "a dot");
    assert_eq!(sends["media_base64"]["message"]["documentMessage"]["fileName"], "order.pdf");
    assert_eq!(sends["location"]["message"]["locationMessage"]["name"], "Shop");
    assert_eq!(sends["contact"]["message"]["contactMessage"]["displayName"], "Ana");
    assert_eq!(sends["poll"]["message"]["pollCreationMessage"]["selectableOptionsCount"], 1);
    assert_eq!(sends["reaction"]["message"]["reactionMessage"]["key"]["id"], sends["text"]["messageId"]);
    // A round video note goes as a video (the client posts it as multipart).
    assert_eq!(r["ptv"]["messageType"], "videoMessage", "{}", r["ptv"]);
    assert_eq!(r["ptv"]["message"]["videoMessage"]["mimetype"], "video/mp4");
    // Lists and buttons: the clear refusal.
    assert_eq!(sends["list"]["error"]["code"], "validation_failed", "{}", sends["list"]);
    assert_eq!(
        r["inbox_types"],
        serde_json::json!(["text", "image", "document", "location", "contact", "poll", "reaction"]),
        "the friend's phone got each once, in order"
    );

    // 3. findMessages: Evolution's page of records from the local log.
    let page = &r["find_all"]["messages"];
    assert_eq!(page["total"], 7, "{page}");
    assert_eq!((page["pages"].as_i64(), page["currentPage"].as_i64()), (Some(1), Some(1)));
    let records = page["records"].as_array().unwrap();
    assert_eq!(records[0]["messageType"], "reactionMessage", "newest first");
    assert!(records.iter().all(|m| m["key"]["remoteJid"] == friend_jid && m["key"]["fromMe"] == true));
    assert!(records.iter().all(|m| m["id"].as_str().unwrap().starts_with("msg_")));
    let found = &r["find_text"]["messages"];
    assert_eq!(found["total"], 1);
    assert_eq!(found["records"][0]["message"]["conversation"], "Hello from Evolution");
    let p2 = &r["find_page"]["messages"];
    assert_eq!((p2["pages"].as_i64(), p2["currentPage"].as_i64()), (Some(3), Some(2)));
    assert_eq!(p2["records"].as_array().unwrap().len(), 3);

    // 4. Numbers.
    let numbers = r["numbers"].as_array().unwrap();
    assert_eq!(numbers[0], serde_json::json!({ "exists": true, "jid": friend_jid, "number": FRIEND }));
    assert_eq!(numbers[1]["exists"], false);

    // 5. A group: Baileys' metadata; members added and promoted, one status each.
    let g = &r["group"];
    assert!(g["id"].as_str().unwrap().ends_with("@g.us"), "{g}");
    assert_eq!((g["subject"].as_str(), g["desc"].as_str()), (Some("Orders"), Some("orders desk")));
    assert_eq!(r["group_add"]["updateParticipants"][0]["status"], "200", "{}", r["group_add"]);
    assert_eq!(r["group_promote"]["updateParticipants"][0]["status"], "200");
    let members = r["group_members"]["participants"].as_array().unwrap();
    let newbie = members.iter().find(|p| p["id"] == format!("{NEWBIE}@s.whatsapp.net")).expect("added");
    assert_eq!(newbie["admin"], "admin");
    assert_eq!(members.len(), 3, "{members:?}");

    // The group text mentions every member and quotes the first text.
    assert_eq!(r["group_text"]["messageType"], "conversation", "{}", r["group_text"]);
    let copy = &r["group_copy"];
    let mentions: Vec<&str> =
        copy["mentions"].as_array().unwrap_or_else(|| panic!("{copy}")).iter().map(|m| m.as_str().unwrap()).collect();
    for n in [SHOP, FRIEND, NEWBIE] {
        assert!(mentions.contains(&format!("{n}@s.whatsapp.net").as_str()), "{copy}");
    }
    // It quotes by the network's id (the phone never sees our msg_ ids), like the reaction.
    assert_eq!(copy["reply_to"], r["inbox_ids"]["text"], "{copy}");
    assert_eq!(r["inbox_reaction"]["message_id"], r["inbox_ids"]["text"]);

    // findChats and findContacts narrow and window as Evolution's do (channel.service.ts
    // fetchChats: where.remoteJid as a number or JID, take, skip; fetchContacts:
    // where.remoteJid, offset and page).
    let chats = r["chats_all"].as_array().unwrap_or_else(|| panic!("{}", r["chats_all"]));
    assert!(chats.len() >= 2, "the friend and the group: {chats:?}");
    assert_eq!(r["chats_none"], r["chats_all"], "no body is no filter");
    let one = r["chats_one"].as_array().unwrap();
    assert_eq!((one.len(), &one[0]["remoteJid"]), (1, &serde_json::json!(friend_jid)));
    assert_eq!(r["chats_window"], serde_json::json!([chats[1]]));
    assert_eq!(r["chats_bad"]["error"]["code"], "validation_failed", "{}", r["chats_bad"]);
    assert_eq!(r["chats_take_bad"]["error"]["code"], "validation_failed");
    let contacts = r["contacts_all"].as_array().unwrap_or_else(|| panic!("{}", r["contacts_all"]));
    assert!(contacts.len() >= 2, "{contacts:?}");
    let one = r["contacts_one"].as_array().unwrap();
    assert_eq!((one.len(), &one[0]["id"]), (1, &serde_json::json!(friend_jid)));
    assert_eq!(r["contacts_page1"], serde_json::json!([contacts[0]]));
    assert_eq!(r["contacts_page2"], serde_json::json!([contacts[1]]));

    // 6. Labels on the business account; a personal one is refused.
    assert_eq!(r["labels"], serde_json::json!([{ "id": "7", "name": "VIP", "color": 3, "predefinedId": null }]));
    assert!(r["labels_personal"].as_str().unwrap().contains("business_account_required"), "{}", r["labels_personal"]);

    // The other routes, each the /v1 operation it stands for.
    let m = &r["more"];
    assert_eq!(m["profile_name"], serde_json::json!({ "update": "success" }), "{m}");
    assert_eq!(m["profile_status"]["update"], "success");
    assert_eq!(m["fetch_profile"]["wuid"], friend_jid);
    assert_eq!(m["fetch_profile"]["numberExists"], true);
    assert_eq!(m["privacy_set"]["data"]["readreceipts"], "none", "{}", m["privacy_set"]);
    assert_eq!(m["privacy"]["readreceipts"], "none");
    assert_eq!(
        (m["settings_set"]["rejectCall"].as_bool(), m["settings_set"]["msgCall"].as_str()),
        (Some(true), Some("busy"))
    );
    assert_eq!(m["settings_find"]["rejectCall"], true);
    assert_eq!(m["settings_bad"]["error"]["code"], "validation_failed", "alwaysOnline is not offered");
    assert_eq!(m["presence"]["presence"], "composing");
    assert_eq!(m["typing_from"], serde_json::json!([SHOP]), "netsim shows the account typing");
    assert_eq!(m["presence_shown"], "available");
    assert_eq!(m["archive"], serde_json::json!({ "chatId": friend_jid, "archived": true }));
    assert_eq!(m["read"]["read"], "success");
    assert_eq!(m["picture"]["wuid"], friend_jid);
    assert_eq!(m["status"]["key"]["remoteJid"], "status@broadcast", "{}", m["status"]);
    assert_eq!(m["status"]["status"], "PENDING");
    assert_eq!(m["base64_matches"], true, "{}", m["base64"]);
    assert_eq!(
        (m["base64"]["mediaType"].as_str(), m["base64"]["mimetype"].as_str()),
        (Some("image"), Some("image/png"))
    );
    assert_eq!((m["block"]["block"].as_str(), m["unblock"]["block"].as_str()), (Some("success"), Some("success")));
    assert_eq!(m["edit"]["edited"], true, "{}", m["edit"]);
    assert_eq!(m["edited_copy"]["text"], "Hello (edited)", "the friend's copy changed: {}", m["edited_copy"]);
    assert_eq!(m["revoke"]["revoked"], true, "{}", m["revoke"]);
    assert_eq!(m["revoked_copy"]["body"]["revoked"], true, "{}", m["revoked_copy"]);
    assert_eq!(m["revoke_theirs"]["error"]["code"], "validation_failed", "only the account's own");
    assert_eq!(m["group_picture"]["update"], "success", "{}", m["group_picture"]);
    assert_eq!(m["group_on_network"]["picture_size"], 70, "netsim has the picture: {}", m["group_on_network"]);
    assert_eq!(m["group_picture_png"]["error"]["code"], "validation_failed", "only a JPEG");
    assert_eq!(m["invite_info"]["subject"], "Orders", "{}", m["invite_info"]);
    assert_eq!(m["ephemeral"]["success"], true, "{}", m["ephemeral"]);
    assert_eq!(m["ephemeral_bad"]["error"]["code"], "validation_failed");
    assert_eq!(m["ephemeral_shown"], 604_800, "the network keeps the timer");
    assert_eq!(m["send_invite"]["send"], true, "{}", m["send_invite"]);
    let invite = m["send_invite"]["inviteUrl"].as_str().unwrap();
    assert_eq!(m["invite_text"], serde_json::json!([format!("Join our orders group\n\n{invite}")]));

    // 7. The Evolution-format webhook: `messages.upsert` for the friend's message, to the
    //    URL with the event's name (byEvents), signed like every delivery.
    let set = &r["webhook_set"];
    assert_eq!(
        (set["events"].clone(), set["webhookByEvents"].clone()),
        (serde_json::json!(["MESSAGES_UPSERT"]), Value::Bool(true))
    );
    assert!(set["secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(r["webhook_find"]["url"], set["url"]);
    let d = &r["webhook_delivery"];
    assert_eq!(d["path"], "/evolution/messages-upsert", "{d}");
    assert_eq!(d["signed"], true);
    let b = &d["body"];
    assert_eq!(b["event"], "messages.upsert");
    assert_eq!(b["instance"], "evo-shop");
    assert_eq!(b["sender"], format!("{SHOP}@s.whatsapp.net"));
    assert!(b["destination"].as_str().unwrap().ends_with("/evolution"));
    assert!(b["server_url"].as_str().unwrap().starts_with("http://"));
    assert!(b["date_time"].as_str().unwrap().ends_with('Z'));
    assert!(b["apikey"].is_null(), "no token in a payload");
    assert_eq!(b["data"]["key"]["remoteJid"], friend_jid);
    assert_eq!(b["data"]["key"]["fromMe"], false);
    assert_eq!(b["data"]["message"]["conversation"], "is my order ready?");
    assert_eq!(b["data"]["messageType"], "conversation");
    assert_eq!(r["webhook_extra"], Value::Null, "only the events asked for");
    assert_eq!(r["webhook_extra_late"], serde_json::json!([]), "only the events asked for, even late");
    assert_eq!(r["webhook_base64_set"]["webhookBase64"], true, "{}", r["webhook_base64_set"]);
    assert_eq!(r["webhook_base64_set"]["byEvents"], Value::Null);
    assert_eq!(r["webhook_base64_set"]["webhookByEvents"], true, "fields left out keep their value");
    let image = &r["webhook_image"];
    assert_eq!(
        (image["type"].as_str(), image["caption"].as_str()),
        (Some("imageMessage"), Some("the receipt")),
        "{image}"
    );
    assert_eq!(image["base64_matches"], true, "webhook_base64 carries the image's bytes");

    // The proxy is the admin's; its password never comes back.
    assert_eq!(r["proxy_instance"]["error"]["code"], "forbidden", "{}", r["proxy_instance"]);
    assert_eq!(r["proxy_set"]["host"], "10.0.0.1", "{}", r["proxy_set"]);
    assert_eq!((r["proxy_set"]["port"].as_str(), r["proxy_set"]["username"].as_str()), (Some("3128"), Some("u")));
    assert_eq!(r["proxy_find"]["username"], "***", "an instance token sees no user name");
    assert!(!r.to_string().contains("s3cret-pass"), "the password is never shown");
    assert_eq!(r["proxy_off"]["enabled"], false);

    // instance/create registers Evolution's webhook object; a refused one creates nothing.
    let hooked = &r["create_hooked"];
    assert_eq!(hooked["webhook"]["events"], serde_json::json!(["CONNECTION_UPDATE"]), "{hooked}");
    assert!(hooked["webhook"]["secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(r["create_bad_hook"]["error"]["code"], "validation_failed", "{}", r["create_bad_hook"]);
    assert_eq!(r["unhooked_listed"], serde_json::json!([]));

    // Logout and delete.
    assert_eq!(r["logout"]["status"], "SUCCESS");
    assert_eq!(r["delete"]["response"]["message"], "Instance deleted");
    stop.cancel();
}

/// `fetchInstances` by `instanceName` or `instanceId` finds any instance, also one past
/// the first 1,000 that an unfiltered answer lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_instances_finds_one_by_name_or_id_past_the_first_thousand() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    let pool = c.pool().await;
    sqlx::query(
        "INSERT INTO instances (id, name, token_hash, min_interval_ms, max_per_minute) \
         SELECT 'inst_' || lpad(n::text, 32, '0'), 'bulk-' || lpad(n::text, 4, '0'), 'hash-' || n, 2000, 20 \
         FROM generate_series(1, 1001) AS n",
    )
    .execute(&pool)
    .await
    .unwrap();
    let admin = c.api.anon().with_header("apikey", c.api.config.admin_token.as_deref().unwrap());
    let all = admin.get("/instance/fetchInstances").await.expect(200);
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 1000, "an unfiltered answer is bounded");
    assert!(all.iter().all(|i| i["name"] != "bulk-1001"));
    let last = format!("inst_{:0>32}", 1001);
    for q in ["instanceName=bulk-1001".to_string(), format!("instanceId={last}")] {
        let one = admin.get(&format!("/instance/fetchInstances?{q}")).await.expect(200);
        assert_eq!(one.as_array().map(Vec::len), Some(1), "{q}: {one}");
        assert_eq!((one[0]["name"].as_str(), one[0]["id"].as_str()), (Some("bulk-1001"), Some(last.as_str())));
    }
    // Both given: they must name the same instance.
    let mixed = admin.get("/instance/fetchInstances?instanceName=bulk-1001&instanceId=inst_nope").await.expect(200);
    assert_eq!(mixed, serde_json::json!([]));
}
