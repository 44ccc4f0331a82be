//! The MCP endpoint: the official MCP SDKs, Python's (`mcp` from PyPI, in the test venv)
//! and TypeScript's (`@modelcontextprotocol/sdk` from npm), as clients over Streamable
//! HTTP and over stdio (`paceline mcp`), sending to a netsim phone; and the HTTP-level rules (tokens, Host and Origin on a loopback listener,
//! methods, Accept).

use std::process::Command;
use std::time::Duration;

use harness::cluster::{wait_for, Cluster};
use harness::TestApi;
use serde_json::{json, Value};

use crate::bin;

const A: &str = "5511999994001";
const B: &str = "5511999994002";
/// No account has this number.
const NOBODY: &str = "5511999994999";

fn names(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect()
}

/// Runs one official SDK's client script against the cluster; its report.
async fn run_client(sdk: Sdk, c: &Cluster, tokens: [&str; 3], account: &Account) -> Value {
    let [instance, read_only, send_only] = tokens;
    let mut cmd = match sdk {
        Sdk::Python => {
            let mut cmd = Command::new(harness::test_python());
            cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/client.py"));
            cmd
        }
        Sdk::TypeScript => {
            let (node, modules) = harness::test_node();
            let mut cmd = Command::new(node);
            cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/client.mjs")).env("MCP_NODE_MODULES", modules);
            cmd
        }
    };
    cmd.env("MCP_URL", format!("http://{}/mcp", c.api.addr))
        .env("MCP_ADMIN", c.api.config.admin_token.clone().unwrap())
        .env("MCP_INSTANCE", instance)
        .env("MCP_READ_ONLY", read_only)
        .env("MCP_SEND_ONLY", send_only)
        .env("MCP_PHONE", B)
        .env("MCP_INVALID", NOBODY)
        .env("PACELINE_BIN", bin())
        .env("MCP_ACCOUNT", &account.token)
        .env("MCP_ACCOUNT_INSTANCE", &account.instance)
        .env("MCP_OTHER_INSTANCE", &account.other);
    let out = tokio::task::spawn_blocking(move || cmd.output()).await.unwrap().expect("the client runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the {sdk:?} MCP client failed:\n{stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

/// An account's token, its instance, and an instance outside it.
struct Account {
    token: String,
    instance: String,
    other: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Sdk {
    Python,
    TypeScript,
}

/// The official MCP SDKs as clients, Python's (`mcp` from PyPI) and TypeScript's
/// (`@modelcontextprotocol/sdk` from npm, which checks every tool result, errors
/// included, against the tool's output schema), each over Streamable HTTP and over stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_operate_the_gateway_over_http_and_stdio() {
    let c = Cluster::start(bin(), 1, |_| {}).await;
    c.phone(A, false).await;
    c.phone(B, false).await;
    let (inst, token) = c.paired_instance("mcp", A).await;
    let id = inst.id.to_string();
    c.unpaced(&id).await;
    let owner = c.api.client(Some(token.clone()));
    let read_only = c.api.create_key(&owner, &id, "read_only").await;
    let send_only = c.api.create_key(&owner, &id, "send_only").await;
    // A second instance the admin sees and the instance token does not.
    c.api.create_instance("mcp-other").await;
    // An account with an instance of its own: it lists and reaches that one only.
    let (_, acct) = crate::accounts::account(&c.api, "mcp-account", json!({})).await;
    let account = Account {
        instance: crate::accounts::instance(&acct, "mcp-acct").await,
        token: acct.token.clone().unwrap(),
        other: id.clone(),
    };

    for sdk in [Sdk::Python, Sdk::TypeScript] {
        let r = run_client(sdk, &c, [&token, &read_only, &send_only], &account).await;
        check_report(sdk, &r, &id);
        if sdk == Sdk::Python {
            let a = &r["account"];
            assert_eq!(names(&a["tools"]).len(), 13, "an account token sees every tool: {a}");
            let listed = a["instances"]["structured"]["instances"].as_array().unwrap();
            assert_eq!(listed.len(), 1, "{a}");
            assert_eq!(listed[0]["id"], account.instance.as_str());
            assert_eq!(a["own"]["structured"]["id"], account.instance.as_str(), "{a}");
            assert_eq!(a["other"]["is_error"], true, "{a}");
            assert_eq!(a["other"]["structured"]["error"]["code"], "forbidden", "{a}");
        }
    }

    // The phone got each message once.
    let want = ["hello from mcp", "hello over stdio", "hello from the typescript sdk", "hello over typescript stdio"];
    let inbox = wait_for(Duration::from_secs(10), || async {
        let v: Value = c.netsim().get(&format!("/control/phones/{B}/inbox")).await.expect(200);
        let texts: Vec<String> =
            v["messages"].as_array().unwrap().iter().filter_map(|m| m["text"].as_str().map(String::from)).collect();
        (texts.len() >= want.len()).then_some(texts)
    })
    .await
    .expect("B got the messages");
    for w in want {
        assert_eq!(inbox.iter().filter(|t| *t == w).count(), 1, "{w}: {inbox:?}");
    }

    // Tool calls are counted by tool and result.
    let metrics = shared::telemetry::prometheus().render();
    let line = |tool: &str, result: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("paceline_mcp_tool_calls_total")
                    && l.contains(&format!("tool=\"{tool}\""))
                    && l.contains(&format!("result=\"{result}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert_eq!(line("send_message", "ok"), 4.0, "{metrics}");
    assert_eq!(line("send_message", "invalid_number"), 4.0, "{metrics}");
}

/// What every SDK's report must show.
fn check_report(sdk: Sdk, r: &Value, id: &str) {
    // 1. Initialize: protocol negotiated (Python's read_only client spoke the current
    //    revision, without a handshake).
    if sdk == Sdk::Python {
        assert!(r["admin"]["protocol"].as_str().unwrap().starts_with("20"), "{}", r["admin"]);
        assert_eq!(r["stdio"]["protocol"], r["admin"]["protocol"]);
        assert_eq!(r["read_only"]["protocol"], "2026-07-28", "{}", r["read_only"]);
    }

    // 2. Each token sees what it may call.
    let all = [
        "check_numbers",
        "connect_instance",
        "get_chat_messages",
        "get_instance",
        "get_message",
        "get_qr",
        "list_chats",
        "list_contacts",
        "list_deliveries",
        "list_instances",
        "list_webhooks",
        "mark_chat_read",
        "send_message",
    ];
    assert_eq!(names(&r["admin"]["tools"]), all, "{sdk:?}");
    assert_eq!(names(&r["instance"]["tools"]), all, "{sdk:?}");
    assert_eq!(names(&r["stdio"]["tools"]), all, "{sdk:?}");
    let ro = names(&r["read_only"]["tools"]);
    assert!(ro.contains(&"list_instances") && ro.contains(&"get_chat_messages"), "{ro:?}");
    for hidden in ["send_message", "check_numbers", "connect_instance", "mark_chat_read", "get_qr"] {
        assert!(!ro.contains(&hidden), "a read_only key does not see {hidden}");
    }
    assert_eq!(names(&r["send_only"]["tools"]), ["check_numbers", "get_message", "send_message"]);
    assert!(r["read_only"]["send_refused"].as_str().is_some(), "{sdk:?}: {}", r["read_only"]);

    // The admin lists every instance; an instance token only its own.
    let admin_list = r["admin"]["instances"]["structured"]["instances"].as_array().unwrap();
    assert!(admin_list.len() >= 2);
    let own_list = r["instance"]["instances"]["structured"]["instances"].as_array().unwrap();
    assert_eq!(own_list.len(), 1);
    assert_eq!(own_list[0]["id"], id);
    assert_eq!(r["instance"]["instance"]["structured"]["queue_depth"], 0);
    assert_eq!(r["admin"]["no_instance_id"]["is_error"], true);
    assert_eq!(r["admin"]["no_instance_id"]["structured"]["error"]["code"], "validation_failed");

    // 3-5. Sent through the queue, followed, and refused for a number without an
    // account: a failed operation is a result with isError, its error structured.
    for via in ["instance", "stdio"] {
        let v = &r[via];
        assert_eq!(v["send"]["is_error"], false, "{sdk:?} {via}: {}", v["send"]);
        assert_eq!(v["send"]["structured"]["status"], "sent", "{sdk:?} {via}");
        assert_eq!(v["get"]["structured"]["status"], "sent", "{sdk:?} {via}");
        assert_eq!(v["invalid"]["is_error"], true, "{sdk:?} {via}: {}", v["invalid"]);
        assert_eq!(v["invalid"]["structured"]["error"]["code"], "invalid_number", "{sdk:?} {via}: {}", v["invalid"]);
        assert_eq!(v["invalid"]["structured"]["error"]["retryable"], false, "{sdk:?} {via}");
        let text = v["invalid"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("invalid_number:") && !text.contains(NOBODY), "no number in errors: {text}");
    }
    // Asked for progress, the wait reported it (so the answer was an event stream).
    assert!(!r["instance"]["progress"].as_array().unwrap().is_empty(), "{sdk:?}: {}", r["instance"]["progress"]);
    assert_eq!(r["instance"]["check"]["structured"]["results"][0]["exists"], true, "{}", r["instance"]["check"]);
    assert!(r["instance"]["chats"]["structured"]["chats"].is_array());
    assert_eq!(
        names(&r["instance"]["resources"]),
        [format!("paceline://instances/{id}"), format!("paceline://instances/{id}/chats")]
    );
    assert!(r["instance"]["resource_text"].as_str().unwrap().contains(id));
}

/// One raw MCP POST.
async fn post(api: &TestApi, token: Option<&str>, headers: &[(&str, &str)], body: &Value) -> reqwest::Response {
    let mut rb = reqwest::Client::new()
        .post(format!("http://{}/mcp", api.addr))
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    rb.send().await.unwrap()
}

fn initialize() -> Value {
    json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "t", "version": "1" } } })
}

#[tokio::test]
async fn the_endpoint_checks_tokens_hosts_origins_methods_and_accept() {
    let mut config = harness::test_config();
    config.public_url = Some("https://gw.example.com".parse().unwrap());
    let api = TestApi::start_with(config).await;
    let (_, token) = api.create_instance("mcp-http").await;
    let t = Some(token.as_str());

    // Initialize and the initialized notification, statelessly.
    let res = post(&api, t, &[], &initialize()).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("mcp-session-id").is_none(), "stateless: no session");
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    let v: Value = res.json().await.unwrap();
    assert_eq!(v["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(v["result"]["serverInfo"]["name"], "paceline");
    let note = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    assert_eq!(post(&api, t, &[], &note).await.status(), 202);
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" });
    let v: Value = post(&api, t, &[], &ping).await.json().await.unwrap();
    assert_eq!(v["id"], 2);
    assert!(v["result"].is_object(), "{v}");

    // Tokens: none or an invalid one gets 401 with the envelope.
    for bad in [None, Some("pl_inst_notarealtokennotarealtokennotarealtoken1")] {
        let res = post(&api, bad, &[], &ping).await;
        assert_eq!(res.status(), 401);
        let v: Value = res.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unauthorized");
    }

    // DNS rebinding: on this loopback listener, a foreign Host or Origin is refused.
    for (name, value) in [("host", "evil.example"), ("origin", "http://evil.example"), ("origin", "null")] {
        let res = post(&api, t, &[(name, value)], &ping).await;
        assert_eq!(res.status(), 403, "{name}: {value}");
        let v: Value = res.json().await.unwrap();
        assert_eq!(v["error"]["code"], "forbidden");
    }
    // Even without a token: the host is checked first.
    assert_eq!(post(&api, None, &[("host", "evil.example")], &ping).await.status(), 403);
    // Loopback names and the host of public_url pass.
    let port = api.addr.port().to_string();
    for (name, value) in [
        ("host", format!("localhost:{port}")),
        ("host", format!("[::1]:{port}")),
        ("host", "gw.example.com".to_string()),
        ("origin", "https://gw.example.com".to_string()),
        ("origin", format!("http://127.0.0.1:{port}")),
    ] {
        assert_eq!(post(&api, t, &[(name, value.as_str())], &ping).await.status(), 200, "{name}: {value}");
    }

    // A client that does not accept both JSON and event streams.
    let res = reqwest::Client::new()
        .post(format!("http://{}/mcp", api.addr))
        .bearer_auth(&token)
        .header("accept", "application/json")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 406);

    // What is not a JSON-RPC message is our envelope's 400, before the protocol reads it.
    for bad in [
        json!({}),
        json!({ "jsonrpc": "1.0", "method": "ping" }),
        json!({ "jsonrpc": "2.0", "method": "" }),
        json!({ "jsonrpc": "2.0", "method": "ping", "id": [1] }),
        json!({ "jsonrpc": "2.0", "method": "ping\u{0}" }),
    ] {
        let res = post(&api, t, &[], &bad).await;
        assert_eq!(res.status(), 400, "{bad}");
        let v: Value = res.json().await.unwrap();
        assert_eq!(v["error"]["code"], "validation_failed", "{bad}");
    }

    // GET (no server-initiated stream) and DELETE (no session) answer 405.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let res = reqwest::Client::new()
            .request(method.clone(), format!("http://{}/mcp", api.addr))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 405, "{method}");
    }

    // A hidden or unknown tool is a JSON-RPC error; a failing tool an isError result.
    let call = |name: &str, args: Value| json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": name, "arguments": args } });
    let v: Value = post(&api, t, &[], &call("drop_database", json!({}))).await.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32602, "{v}");
    let v: Value =
        post(&api, t, &[], &call("get_message", json!({ "msg_id": "msg_nope" }))).await.json().await.unwrap();
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert_eq!(v["result"]["structuredContent"]["error"]["code"], "validation_failed", "{v}");
    let v: Value = post(&api, t, &[], &call("get_instance", json!({ "surprise": 1 }))).await.json().await.unwrap();
    assert_eq!(v["result"]["isError"], true, "{v}");
    assert!(v["result"]["content"][0]["text"].as_str().unwrap().contains("surprise"), "{v}");
}
