//! The auth matrix: every operation of the OpenAPI description, called with every kind
//! of token (none, invalid, a wrong admin token, another instance's token, the
//! instance's token, a `read_only` and a `send_only` key, a revoked and an expired key,
//! the account token of the instance's account, another account's token, a suspended
//! account's token, the admin token), answers as its row of `api::access::ROUTES` says:
//! 401, 403, 404 (another instance's webhooks, deliveries and action routes are not told
//! of), or through auth. An operation without a row fails the test.

use std::time::Duration;

use api::access::{self, Access};
use harness::cluster::wait_for;
use harness::{Client, TestApi};
use serde_json::{json, Value};
use shared::db::api_keys::KeyScope;

struct Op {
    method: reqwest::Method,
    path: String,
    /// Takes its token in `X-API-Key` (the action routes).
    x_api_key: bool,
}

fn operations() -> Vec<Op> {
    let doc: Value = serde_json::from_str(api::openapi::json()).unwrap();
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let sec = op["security"].as_array().unwrap();
            let x_api_key = sec.iter().any(|s| s.get("api_key").is_some());
            ops.push(Op { method: method.to_uppercase().parse().unwrap(), path: path.clone(), x_api_key });
        }
    }
    assert!(ops.len() >= 90, "the description lists every route");
    ops
}

/// An instance as the routes name it: by id (`/v1`) or by name (action routes); and
/// its account, as the account routes name it.
struct Target {
    id: String,
    name: String,
    account: String,
}

impl Target {
    fn of(inst: &harness::Instance, account: &str) -> Target {
        Target { id: inst.id.to_string(), name: inst.name.clone(), account: account.to_string() }
    }
}

fn fill(path: &str, t: &Target) -> String {
    let path = match path.strip_prefix("/v1/accounts/{account_id}") {
        Some(rest) => format!("/v1/accounts/{}{rest}", t.account),
        None => path.to_string(),
    };
    path.replace("{id}", &t.id)
        .replace("{instanceName}", &t.name)
        .replace("{msg_id}", "msg_00000000000000000000000000000000")
        .replace("{webhook_id}", "wh_00000000000000000000000000000000")
        .replace("{delivery_id}", "dlv_00000000000000000000000000000000")
        .replace("{jid}", "5511999990001")
        .replace("{media_id}", "med_00000000000000000000000000000000")
        .replace("{label_id}", "1")
        .replace("{key_id}", "key_00000000000000000000000000000000")
        .replace("{group}", "120363000000000001@g.us")
        .replace("{action}", "follow")
        .replace("{token_id}", "atok_00000000000000000000000000000000")
}

async fn call(client: &Client, op: &Op, t: &Target) -> harness::Resp {
    let mut client = client.clone();
    if op.x_api_key {
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
    if [reqwest::Method::POST, reqwest::Method::PUT, reqwest::Method::PATCH].contains(&op.method) {
        rb = rb.json(&json!({}));
    }
    client.send(rb).await
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Invalid,
    WrongAdmin,
    OtherInstance,
    Instance,
    ReadOnly,
    SendOnly,
    Revoked,
    Expired,
    /// The token of the account holding the instance.
    Account,
    /// Another account's token.
    OtherAccount,
    /// The token of a suspended account holding the instance (`Target::suspended`).
    Suspended,
    Admin,
}

/// What a call should get.
#[derive(Debug, PartialEq)]
enum Expect {
    Status(u16),
    /// Through auth: anything but 401 and 403, and no 5xx.
    Allowed,
}

fn expect(kind: Kind, access: Access, op: &Op) -> Expect {
    let per_account = op.path.starts_with("/v1/accounts/{account_id}");
    let per_instance = !per_account && (op.path.contains("{id}") || op.path.contains("{instanceName}"));
    // Another instance's action routes, webhooks and deliveries are not told of.
    let hidden = op.path.contains("{instanceName}") || op.path.starts_with("/v1/instances/{id}/webhooks");
    // MCP's tools are checked one by one, each as the route it calls.
    let reads = access.reads(&op.method.as_str().parse().unwrap(), &op.path) || op.path == "/mcp";
    match (kind, access) {
        (Kind::Invalid | Kind::WrongAdmin | Kind::Revoked | Kind::Expired, _) => Expect::Status(401),
        (Kind::Account | Kind::OtherAccount | Kind::Suspended, a) if !a.admits_account() => Expect::Status(403),
        (Kind::OtherAccount, _) if per_instance => Expect::Status(if hidden { 404 } else { 403 }),
        (Kind::OtherAccount, _) if per_account => Expect::Status(403),
        (Kind::Suspended, _) if !reads => Expect::Status(403),
        (Kind::Account | Kind::OtherAccount | Kind::Suspended, _) => Expect::Allowed,
        (_, Access::Account) if per_account && kind != Kind::Admin => Expect::Status(403),
        (Kind::OtherInstance | Kind::Instance | Kind::ReadOnly | Kind::SendOnly, Access::Account) => {
            Expect::Status(403)
        }
        (Kind::Admin, _) | (_, Access::AnyToken) => Expect::Allowed,
        (Kind::OtherInstance, _) if per_instance => Expect::Status(if hidden { 404 } else { 403 }),
        (Kind::OtherInstance | Kind::Instance, Access::Admin) => Expect::Status(403),
        (Kind::OtherInstance | Kind::Instance, _) => Expect::Allowed,
        (Kind::ReadOnly, a) if a.admits(KeyScope::ReadOnly) => Expect::Allowed,
        (Kind::SendOnly, a) if a.admits(KeyScope::SendOnly) => Expect::Allowed,
        (Kind::ReadOnly | Kind::SendOnly, _) => Expect::Status(403),
    }
}

async fn key(owner: &Client, id: &str, scope: &str, expires_at: Option<String>) -> (String, String) {
    let body = json!({ "name": format!("{scope} key"), "scope": scope, "expires_at": expires_at });
    let k = owner.post(&format!("/v1/instances/{id}/api-keys"), &body).await.expect(201);
    (k["key"]["id"].as_str().unwrap().to_string(), k["token"].as_str().unwrap().to_string())
}

#[tokio::test]
async fn every_route_answers_every_kind_of_token_as_its_row_says() {
    let api = TestApi::start().await;
    let admin = api.admin();
    let made = |name: &str| {
        let (admin, body) = (admin.clone(), json!({ "name": name }));
        async move { admin.post("/v1/accounts", &body).await }
    };
    let acct = made("holder").await.expect(201);
    let other_acct = made("stranger").await.expect(201);
    let suspended = made("paused").await.expect(201);
    let token_of = |a: &Value| a["token"].as_str().unwrap().to_string();
    let id_of = |a: &Value| a["account"]["id"].as_str().unwrap().to_string();
    let (own, own_token) = api.create_instance("owner").await;
    let (_, other_token) = api.create_instance("other").await;
    admin.put(&format!("/v1/instances/{}/account", own.id), &json!({ "account_id": id_of(&acct) })).await.expect(204);
    // The suspended account holds an instance of the same name's twin: it is checked on
    // its own target.
    let (held, _) = api.create_instance("held").await;
    admin
        .put(&format!("/v1/instances/{}/account", held.id), &json!({ "account_id": id_of(&suspended) }))
        .await
        .expect(204);
    admin.patch(&format!("/v1/accounts/{}", id_of(&suspended)), &json!({ "state": "suspended" })).await.expect(200);
    let t = Target::of(&own, &id_of(&acct));
    let held_target = Target::of(&held, &id_of(&suspended));
    let owner = api.client(Some(own_token.clone()));
    let (_, read_only) = key(&owner, &t.id, "read_only", None).await;
    let (_, send_only) = key(&owner, &t.id, "send_only", None).await;
    let (revoked_id, revoked) = key(&owner, &t.id, "read_only", None).await;
    owner.delete(&format!("/v1/instances/{}/api-keys/{revoked_id}", t.id)).await.expect(204);
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(1)).to_rfc3339();
    let (_, expired) = key(&owner, &t.id, "read_only", Some(soon)).await;
    let gone = wait_for(Duration::from_secs(10), || async {
        (api.client(Some(expired.clone())).get("/v1/me").await.status == 401).then_some(())
    })
    .await;
    assert!(gone.is_some(), "the key expires");

    let client = |kind: Kind| {
        api.client(Some(match kind {
            Kind::Invalid => "pl_inst_notarealtokennotarealtokennotarealtoken1".to_string(),
            Kind::WrongAdmin => "pl_admin_notthetokennotthetokennotthetoken".into(),
            Kind::OtherInstance => other_token.clone(),
            Kind::Instance => own_token.clone(),
            Kind::ReadOnly => read_only.clone(),
            Kind::SendOnly => send_only.clone(),
            Kind::Revoked => revoked.clone(),
            Kind::Expired => expired.clone(),
            Kind::Account => token_of(&acct),
            Kind::OtherAccount => token_of(&other_acct),
            Kind::Suspended => token_of(&suspended),
            Kind::Admin => api.config.admin_token.clone().unwrap(),
        }))
    };
    let kinds = [
        Kind::Invalid,
        Kind::WrongAdmin,
        Kind::OtherInstance,
        Kind::ReadOnly,
        Kind::SendOnly,
        Kind::Revoked,
        Kind::Expired,
        Kind::OtherAccount,
        Kind::Suspended,
        Kind::Instance,
        Kind::Account,
        Kind::Admin,
    ];
    let mut checked = 0;
    for op in operations() {
        let what = format!("{} {}", op.method, op.path);
        let method: axum::http::Method = op.method.as_str().parse().unwrap();
        let access =
            access::of(&method, &op.path).unwrap_or_else(|| panic!("{what} has no row in api::access::ROUTES"));
        let anon = call(&api.anon(), &op, &t).await;
        if access == Access::Open {
            // The token is not looked at: every kind gets what no token gets.
            for kind in kinds {
                let r = call(&client(kind), &op, &t).await;
                assert_eq!(r.status, anon.status, "{what} is open; with {kind:?}: {}", r.text);
            }
            continue;
        }
        assert_eq!(anon.status, 401, "{what} without a token: {}", anon.text);
        for kind in kinds {
            // Deleting an instance, or replacing its token, is real: the kinds that may do
            // it do it to a throwaway.
            let deletes = (op.method == reqwest::Method::DELETE
                && ["/v1/instances/{id}", "/instance/delete/{instanceName}"].contains(&op.path.as_str()))
                || (op.method == reqwest::Method::POST && op.path == "/v1/instances/{id}/token");
            // Deleting an account is real too: the admin deletes a throwaway.
            let deletes_account = op.method == reqwest::Method::DELETE && op.path == "/v1/accounts/{account_id}";
            let r = match kind {
                Kind::Instance | Kind::Admin | Kind::Account if deletes => {
                    let (spare, spare_token) = api.create_instance(&format!("spare-{}", suffix())).await;
                    let spare_target = Target::of(&spare, &t.account);
                    let c = match kind {
                        Kind::Admin => client(kind),
                        Kind::Account => {
                            let to = json!({ "account_id": t.account });
                            admin.put(&format!("/v1/instances/{}/account", spare.id), &to).await.expect(204);
                            client(kind)
                        }
                        _ => api.client(Some(spare_token)),
                    };
                    call(&c, &op, &spare_target).await
                }
                Kind::Admin if deletes_account => {
                    let spare = made(&format!("spare-{}", suffix())).await.expect(201);
                    call(&client(kind), &op, &Target { account: id_of(&spare), ..Target::of(&own, "") }).await
                }
                Kind::Suspended => call(&client(kind), &op, &held_target).await,
                _ => call(&client(kind), &op, &t).await,
            };
            match expect(kind, access, &op) {
                Expect::Status(s) => {
                    assert_eq!(r.status, s, "{what} with {kind:?} ({access:?}): {}", r.text);
                    if s == 404 && op.path.starts_with("/v1/instances/{id}/webhooks") {
                        assert_eq!(r.body["error"]["code"], "not_found", "{what}");
                    }
                }
                Expect::Allowed => {
                    assert!(![401, 403].contains(&r.status), "{what} with {kind:?} ({access:?}): {}", r.text);
                    // Through auth, a route answers what its input deserves, never a fault.
                    assert!(r.status < 500, "{what} with {kind:?} ({access:?}) failed: {}", r.text);
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 1100, "{checked} calls");
}

fn suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}
