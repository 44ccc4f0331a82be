//! The auth matrix over every route of the OpenAPI description: no token and a bad token
//! get 401, another instance's token 403 (404 `not_found` on webhook and delivery routes,
//! 404 on the action routes), an instance token on an admin route 403, and the allowed
//! tokens get through auth.

use harness::{Client, TestApi};
use serde_json::{json, Value};

struct Op {
    method: reqwest::Method,
    path: String,
    schemes: Vec<String>,
    public: bool,
}

fn operations() -> Vec<Op> {
    let doc: Value = serde_json::from_str(api::openapi::json()).unwrap();
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let sec = op["security"].as_array().unwrap();
            let public = sec.iter().any(|s| s.as_object().unwrap().is_empty());
            let schemes = sec.iter().flat_map(|s| s.as_object().unwrap().keys().cloned()).collect();
            ops.push(Op { method: method.to_uppercase().parse().unwrap(), path: path.clone(), schemes, public });
        }
    }
    assert!(ops.len() >= 9, "the description lists every route");
    ops
}

/// An instance as the routes name it: by id (`/v1`) or by name (action routes).
struct Target<'a> {
    id: &'a str,
    name: &'a str,
}

fn fill(path: &str, t: &Target) -> String {
    path.replace("{id}", t.id)
        .replace("{instanceName}", t.name)
        .replace("{msg_id}", "msg_00000000000000000000000000000000")
        .replace("{webhook_id}", "wh_00000000000000000000000000000000")
        .replace("{delivery_id}", "dlv_00000000000000000000000000000000")
        .replace("{jid}", "5511999990001")
        .replace("{media_id}", "med_00000000000000000000000000000000")
        .replace("{label_id}", "1")
        .replace("{key_id}", "key_00000000000000000000000000000000")
        .replace("{group}", "120363000000000001@g.us")
        .replace("{action}", "follow")
}

async fn call(client: &Client, op: &Op, t: &Target<'_>) -> harness::Resp {
    let mut client = client.clone();
    if op.schemes.iter().any(|s| s == "api_key") {
        // Action routes take the token in X-API-Key.
        if let Some(token) = client.token.take() {
            client = client.with_header("x-api-key", &token);
        }
    }
    let mut path = fill(&op.path, t);
    if path.ends_with("/events") {
        // An event stream never ends: ask for an unknown type, which is checked (400)
        // only after the token.
        path.push_str("?types=not.a.type");
    }
    let mut rb = client.request(op.method.clone(), &path);
    if op.method == reqwest::Method::POST || op.method == reqwest::Method::PATCH {
        rb = rb.json(&json!({}));
    }
    client.send(rb).await
}

#[tokio::test]
async fn every_route_enforces_its_tokens() {
    let api = TestApi::start().await;
    let (own, own_token) = api.create_instance("owner").await;
    let (other, _) = api.create_instance("other").await;
    let own_t = Target { id: own["id"].as_str().unwrap(), name: own["name"].as_str().unwrap() };
    let other_t = Target { id: other["id"].as_str().unwrap(), name: other["name"].as_str().unwrap() };
    let own_client = api.client(Some(own_token));
    let bad = api.client(Some("pl_inst_notarealtokennotarealtokennotarealtoken1".into()));
    let bad_admin = api.client(Some("pl_admin_notthetokennotthetokennotthetoken".into()));

    // Signed media URLs carry their own credential (tested in chats::media_urls).
    for op in operations().into_iter().filter(|op| op.schemes != ["signed_url"]) {
        let what = format!("{} {}", op.method, op.path);
        let by_name = op.path.contains("{instanceName}");
        let per_instance = op.path.contains("{id}") || by_name;
        if !op.public {
            assert_eq!(call(&api.anon(), &op, &own_t).await.status, 401, "{what} without a token");
            assert_eq!(call(&bad, &op, &own_t).await.status, 401, "{what} with a bad token");
            assert_eq!(call(&bad_admin, &op, &own_t).await.status, 401, "{what} with a wrong admin token");
        }
        let allows_instance = op.schemes.iter().any(|s| s == "instance" || s == "api_key");
        if per_instance {
            // Action routes hide other instances (404), and so do the webhook and delivery
            // routes (404 not_found, interface.md part 5); other /v1 routes forbid them (403).
            let hidden = by_name || op.path.starts_with("/v1/instances/{id}/webhooks");
            let r = call(&own_client, &op, &other_t).await;
            assert_eq!(r.status, if hidden { 404 } else { 403 }, "{what} with another instance's token: {}", r.text);
            if op.path.starts_with("/v1/instances/{id}/webhooks") {
                assert_eq!(r.body["error"]["code"], "not_found", "{what}");
            }
        }
        let r = if op.method == reqwest::Method::DELETE && op.path == "/v1/instances/{id}" {
            // Deleting is real: its own token deletes a throwaway instance.
            let (spare, spare_token) = api.create_instance(&format!("own-{}", uuid_suffix())).await;
            let spare_t = Target { id: spare["id"].as_str().unwrap(), name: spare["name"].as_str().unwrap() };
            call(&api.client(Some(spare_token)), &op, &spare_t).await
        } else {
            call(&own_client, &op, &own_t).await
        };
        if allows_instance || op.public {
            assert!(![401, 403].contains(&r.status), "{what} with its own token: {}", r.text);
        } else {
            assert_eq!(r.status, 403, "{what} is admin-only: {}", r.text);
        }
        // The admin passes auth everywhere (on a throwaway instance: DELETE is real).
        let (spare, _) = api.create_instance(&format!("spare-{}", uuid_suffix())).await;
        let spare_t = Target { id: spare["id"].as_str().unwrap(), name: spare["name"].as_str().unwrap() };
        let r = call(&api.admin(), &op, &spare_t).await;
        assert!(![401, 403].contains(&r.status), "{what} with the admin token: {}", r.text);
    }
}

fn uuid_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}
