//! The crate graph keeps its layers (ARCHITECTURE.md, "Layers"): storage and the bus
//! (`paceline-shared`) at the bottom, the domain core (`paceline-core`) above them, what
//! the HTTP doors share (`paceline-http`) above the core, Evolution's pure payload
//! shapes (`paceline-evolution-shape`) beside the core for its door and the dispatcher,
//! the doors and roles above that, the API server (`paceline-api`: mounts the HTTP doors, MCP over them) above
//! the doors, and only the `paceline` binary above everything. No door depends on
//! another, the core speaks no HTTP, and the worker, the dispatcher, netsim and the console
//! reach the API only over the network. Read from `cargo metadata`, so a new dependency that
//! breaks a layer fails here.

use std::collections::{BTreeMap, BTreeSet};

/// Each workspace package and the workspace packages and HTTP crates it depends on.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline", "--manifest-path", manifest])
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                // Normal dependencies only: tests may reach across layers.
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().expect("a name").to_string())
                .collect();
            (p["name"].as_str().expect("a name").to_string(), deps)
        })
        .collect()
}

/// Doors call the core in process: `/v1` (with the pairing page), Evolution's routes, and
/// the attendant role.
const DOORS: [&str; 3] = ["paceline-v1", "paceline-evolution", "paceline-attendant"];
/// What the HTTP doors share.
const HTTP_COMMON: &str = "paceline-http";
/// Evolution's payload shapes (no HTTP), for its door and the dispatcher.
const EVOLUTION_SHAPE: &str = "paceline-evolution-shape";
/// The server that mounts the HTTP doors (and MCP over them).
const SERVER: &str = "paceline-api";
/// Roles reach the API over the network only; the console, a client of `/v1`, among them
/// (it reads the API's answers as the core's types).
const ROLES: [&str; 4] = ["paceline-worker", "paceline-dispatcher", "paceline-netsim", "paceline-console"];
const HTTP: [&str; 4] = ["axum", "utoipa-axum", "rmcp", "tower-http"];

#[test]
fn the_layers_hold() {
    let g = graph();
    let deps = |name: &str| g.get(name).unwrap_or_else(|| panic!("{name} is in the workspace"));
    let workspace: BTreeSet<&str> = g.keys().map(String::as_str).collect();

    // Storage and the bus: no workspace crate below them.
    let shared: Vec<&String> = deps("paceline-shared").iter().filter(|d| workspace.contains(d.as_str())).collect();
    assert!(shared.is_empty(), "paceline-shared depends on {shared:?}");

    // The core: shared only, and nothing that speaks HTTP.
    for d in deps("paceline-core") {
        assert!(
            !workspace.contains(d.as_str()) || d == "paceline-shared",
            "paceline-core depends on {d}: only paceline-shared is below it"
        );
        assert!(!HTTP.contains(&d.as_str()), "paceline-core depends on {d}: the core speaks no HTTP");
    }

    // Evolution's shapes of our messages and events: pure, above shared only, so the
    // dispatcher shapes Evolution's webhooks without reaching Evolution's door.
    for d in deps(EVOLUTION_SHAPE) {
        assert!(
            !workspace.contains(d.as_str()) || d == "paceline-shared",
            "{EVOLUTION_SHAPE} depends on {d}: only paceline-shared is below it"
        );
        assert!(!HTTP.contains(&d.as_str()), "{EVOLUTION_SHAPE} depends on {d}: shapes speak no HTTP");
    }
    assert!(deps("paceline-evolution").contains(EVOLUTION_SHAPE), "Evolution's door answers in Evolution's shapes");

    // What the HTTP doors share: the core and shared only.
    for d in deps(HTTP_COMMON) {
        assert!(
            !workspace.contains(d.as_str()) || d == "paceline-shared" || d == "paceline-core",
            "{HTTP_COMMON} depends on {d}: only the core and shared are below it"
        );
    }

    // Doors: the core, shared and the HTTP doors' common ground, never another door, a
    // role or the server.
    for door in DOORS {
        for d in deps(door) {
            assert!(
                !(DOORS.contains(&d.as_str()) || ROLES.contains(&d.as_str()) || d == SERVER || d == "paceline"),
                "{door} depends on {d}"
            );
        }
        assert!(deps(door).contains("paceline-core"), "{door} calls the core");
    }

    // The server mounts the HTTP doors; it reaches no role.
    for d in deps(SERVER) {
        assert!(!ROLES.contains(&d.as_str()) && d != "paceline-attendant", "{SERVER} depends on {d}");
    }
    for door in ["paceline-v1", "paceline-evolution"] {
        assert!(deps(SERVER).contains(door), "{SERVER} mounts {door}");
    }

    // Roles reach the API only over the network.
    for role in ROLES {
        for d in deps(role) {
            assert!(
                !(DOORS.contains(&d.as_str()) || d == HTTP_COMMON || d == SERVER),
                "{role} depends on the door {d}"
            );
            assert!(d != "paceline", "{role} depends on the binary");
        }
    }

    // Nothing but the binary (and the test harness) sits on top.
    for (name, d) in &g {
        if name != "paceline" {
            assert!(!d.contains("paceline"), "{name} depends on the binary");
        }
    }
}

/// Only `shared::jid` knows the network's domain suffixes (ARCHITECTURE.md, "Invariants"):
/// no code outside it writes one as a literal (`"@g.us"`, `format!("{id}@newsletter")`,
/// `ends_with("@lid")`); it asks `Jid` or names the server's constant. Tests may write
/// whole JIDs.
#[test]
fn only_jid_knows_the_domain_suffixes() {
    const SUFFIXES: [&str; 5] = ["s.whatsapp.net", "g.us", "lid", "newsletter", "broadcast"];
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut found = Vec::new();
    let mut dirs = vec![root.join("shared/src"), root.join("services")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !matches!(name, "tests" | "target" | "node_modules") {
                    dirs.push(path);
                }
                continue;
            }
            if !name.ends_with(".rs") || name == "tests.rs" || path.ends_with("shared/src/jid.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            // Up to a file's own test module, which may write whole JIDs.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (n, line) in code.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                let literal = SUFFIXES.iter().any(|s| {
                    line.contains(&format!("\"@{s}\""))
                        || line.contains(&format!("}}@{s}\""))
                        || line.contains("ends_with(\"@")
                });
                if literal {
                    found.push(format!("{}:{}", path.strip_prefix(root).unwrap_or(&path).display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "domain suffixes written outside shared::jid: {found:?}");
}
