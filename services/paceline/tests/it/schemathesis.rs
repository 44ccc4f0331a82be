//! The OpenAPI description checked by the tools that rely on it: schemathesis (every
//! check, as the admin, as an instance token and as an account token) against a
//! running API, and
//! openapi-python-client generating a client with every endpoint. Both come from PyPI
//! into the test venv (`scripts/lib/services.sh`).

use std::path::PathBuf;
use std::process::Command;

use harness::TestApi;

/// A tool installed beside the test venv's Python.
fn tool(name: &str) -> PathBuf {
    harness::test_python().parent().expect("the venv's bin").join(name)
}

/// Runs schemathesis with every check over the served description with `token`, on the
/// test's instance; fails with its report when it finds anything.
/// Deleting the run's instance (`/v1` or Evolution's) ends the run's target: neither is
/// tried.
/// Nor is deleting the run's account.
const NOT_TRIED: &[&str] = &["instances_delete", "evolution_instance_delete", "accounts_delete"];

async fn schemathesis(api: &TestApi, token: &str, inst: &harness::Instance, exclude: &[&str]) {
    let account = inst
        .account_id
        .clone()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "acct_00000000000000000000000000000000".into());
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/schemathesis.toml");
    let url = format!("http://{}/v1/openapi.json", api.addr);
    let mut cmd = Command::new(tool("st"));
    cmd.args(["--config-file", config, "run", &url])
        .args(["-H", &format!("Authorization: Bearer {token}"), "-H", &format!("X-API-Key: {token}")])
        // A fixed seed keeps the suite deterministic; loadtest/schemathesis-seeds.sh tries
        // random ones with more examples.
        .args(["--checks", "all", "--max-examples", "15", "--seed", "1", "--workers", "1", "--no-color"])
        // MCP is JSON-RPC behind one route: the MCP SDK's test drives it (tests/it/mcp.rs).
        .args(["--exclude-path", "/mcp"])
        .env("PACELINE_ST_INSTANCE_ID", inst.id.as_str())
        .env("PACELINE_ST_INSTANCE_NAME", &inst.name)
        .env("PACELINE_ST_ACCOUNT_ID", account);
    for op in NOT_TRIED.iter().chain(exclude) {
        cmd.args(["--exclude-operation-id", op]);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output()).await.unwrap().expect("schemathesis runs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "schemathesis found problems:\n{report}\n{}", String::from_utf8_lossy(&out.stderr));
    let summary = report.lines().rev().find(|l| l.contains("generated")).unwrap_or_default();
    println!("schemathesis: {summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_as_the_admin() {
    let api = TestApi::start().await;
    let (inst, _) = api.create_instance("st-admin").await;
    let inst = in_an_account(&api, inst).await;
    let admin = api.config.admin_token.clone().unwrap();
    // Deleting the instance would leave the rest of the run nothing to work on.
    schemathesis(&api, &admin, &inst, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_as_an_instance_token() {
    let api = TestApi::start().await;
    let (inst, token) = api.create_instance("st-instance").await;
    // Its own token may delete its instance, lock itself out with an allow-list, or
    // replace itself: these run in the admin's pass.
    schemathesis(&api, &token, &inst, &["instances_patch", "instances_rotate_token"]).await;
}

/// Puts the instance in a new account (the run's account routes work on it).
async fn in_an_account(api: &TestApi, inst: harness::Instance) -> harness::Instance {
    let (acct, _) = crate::accounts::account(api, &format!("st-{}", inst.name), serde_json::json!({})).await;
    let to = serde_json::json!({ "account_id": acct });
    api.admin().put(&format!("/v1/instances/{}/account", inst.id), &to).await.expect(204);
    api.admin().get(&format!("/v1/instances/{}", inst.id)).await.expect_as(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_nothing_as_an_account_token() {
    let api = TestApi::start().await;
    let (acct, token) = crate::accounts::account(&api, "st-account", serde_json::json!({})).await;
    let id = crate::accounts::instance(&token, "st-account-1").await;
    let inst: harness::Instance = api.admin().get(&format!("/v1/instances/{id}")).await.expect_as(200);
    assert_eq!(inst.account_id.as_ref().map(|a| a.to_string()), Some(acct));
    schemathesis(&api, token.token.as_deref().unwrap(), &inst, &[]).await;
}

#[tokio::test]
async fn openapi_python_client_generates_every_endpoint() {
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/../api/openapi.json");
    let dir = std::env::temp_dir().join(format!("paceline-client-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    // No formatter hooks: only what the generator itself says counts.
    std::fs::write(dir.join("config.yml"), "post_hooks: []\n").unwrap();
    let out = Command::new(tool("openapi-python-client"))
        .args(["generate", "--path", spec, "--meta", "none", "--config", "config.yml"])
        .current_dir(&dir)
        .output()
        .expect("openapi-python-client runs");
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{log}");
    assert!(!log.contains("Warning"), "the generator had warnings:\n{log}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(spec).unwrap()).unwrap();
    let operations = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values().filter(|op| op.get("operationId").is_some()))
        .count();
    let mut generated = 0;
    for tag in std::fs::read_dir(dir.join("paceline_client/api")).unwrap() {
        let tag = tag.unwrap().path();
        if tag.is_dir() {
            generated +=
                std::fs::read_dir(&tag).unwrap().filter(|f| f.as_ref().unwrap().file_name() != "__init__.py").count();
        }
    }
    assert_eq!(generated, operations, "one client function per operation");
    // The client is usable as generated: every module of it imports.
    let import_all = "import importlib, pkgutil, sys\n\
        import paceline_client\n\
        bad = []\n\
        for m in pkgutil.walk_packages(paceline_client.__path__, 'paceline_client.'):\n\
        \x20   try:\n\
        \x20       importlib.import_module(m.name)\n\
        \x20   except Exception as e:\n\
        \x20       bad.append(f'{m.name}: {e!r}')\n\
        print(len(list(pkgutil.walk_packages(paceline_client.__path__, 'paceline_client.'))))\n\
        sys.exit('\\n'.join(bad) if bad else 0)\n";
    let out =
        Command::new(harness::test_python()).args(["-c", import_all]).current_dir(&dir).output().expect("python runs");
    let modules: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    assert!(out.status.success(), "generated modules that do not import:\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(modules > operations, "{modules} modules imported");
    let _ = std::fs::remove_dir_all(&dir);
}
