//! The auth matrix over every route of the OpenAPI description: no token and a bad token
//! get 401, another instance's token 403, an instance token on an admin route 403, and
//! the allowed tokens get through auth.

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

fn fill(path: &str, instance_id: &str) -> String {
    path.replace("{id}", instance_id).replace("{msg_id}", "msg_00000000000000000000000000000000")
}

async fn call(client: &Client, op: &Op, instance_id: &str) -> harness::Resp {
    let mut rb = client.request(op.method.clone(), &fill(&op.path, instance_id));
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
    let own_id = own["id"].as_str().unwrap();
    let other_id = other["id"].as_str().unwrap();
    let own_client = api.client(Some(own_token));
    let bad = api.client(Some("pl_inst_notarealtokennotarealtokennotarealtoken1".into()));
    let bad_admin = api.client(Some("pl_admin_notthetokennotthetokennotthetoken".into()));

    for op in operations() {
        let what = format!("{} {}", op.method, op.path);
        let per_instance = op.path.contains("{id}");
        if !op.public {
            assert_eq!(call(&api.anon(), &op, own_id).await.status, 401, "{what} without a token");
            assert_eq!(call(&bad, &op, own_id).await.status, 401, "{what} with a bad token");
            assert_eq!(call(&bad_admin, &op, own_id).await.status, 401, "{what} with a wrong admin token");
        }
        let allows_instance = op.schemes.iter().any(|s| s == "instance");
        if per_instance {
            let r = call(&own_client, &op, other_id).await;
            assert_eq!(r.status, 403, "{what} with another instance's token: {}", r.text);
        }
        let r = call(&own_client, &op, own_id).await;
        if allows_instance || op.public {
            assert!(![401, 403].contains(&r.status), "{what} with its own token: {}", r.text);
        } else {
            assert_eq!(r.status, 403, "{what} is admin-only: {}", r.text);
        }
        // The admin passes auth everywhere (on a throwaway instance: DELETE is real).
        let (spare, _) = api.create_instance(&format!("spare-{}", uuid_suffix())).await;
        let r = call(&api.admin(), &op, spare["id"].as_str().unwrap()).await;
        assert!(![401, 403].contains(&r.status), "{what} with the admin token: {}", r.text);
    }
}

fn uuid_suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}
