//! The chart rendered: what each install has, the egress it allows, and each role's pod
//! as the code loads and validates it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use shared::config::Role;
use shared::Config;

use super::{check_chart, container_env, find};

/// Loads the configuration from exactly `env` (this test process's own environment).
fn load_config(env: &BTreeMap<String, String>) -> Config {
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("PACELINE_")) {
        std::env::remove_var(k);
    }
    for (k, v) in env {
        std::env::set_var(k, v);
    }
    Config::load(None).expect("the rendered environment loads")
}

#[test]
fn the_chart_renders_validates_and_runs_the_code_as_configured() {
    let summary = check_chart();
    let scenarios = &summary["scenarios"];
    let kinds = |s: &str| -> BTreeSet<String> {
        scenarios[s]["kinds"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect()
    };
    let default = kinds("default");
    for k in [
        "Deployment/paceline-api",
        "Deployment/paceline-worker",
        "Deployment/paceline-dispatcher",
        "Deployment/paceline-attendant",
        "Deployment/paceline-chatwoot",
        "Job/paceline-migrate",
        "Secret/paceline",
        "Secret/paceline-migrate",
        "ConfigMap/paceline-config",
        "ConfigMap/paceline-dashboard",
        "Service/paceline",
        "Service/paceline-metrics",
        "ServiceAccount/paceline",
        "PodDisruptionBudget/paceline-api",
        "PodDisruptionBudget/paceline-worker",
        "PodDisruptionBudget/paceline-dispatcher",
        "HorizontalPodAutoscaler/paceline-api",
        "HorizontalPodAutoscaler/paceline-dispatcher",
        "NetworkPolicy/paceline-api",
        "NetworkPolicy/paceline-backends",
        "NetworkPolicy/paceline-egress",
    ] {
        assert!(default.contains(k), "default install has {k}: {default:?}");
    }
    // Egress by default: DNS, the backends' ports, the release's pods, and public
    // addresses only.
    let manifests = scenarios["default"]["manifests"].as_array().unwrap();
    let egress = &find(manifests, "NetworkPolicy", "paceline-egress")["spec"];
    assert_eq!(egress["policyTypes"], json!(["Egress"]));
    assert_eq!(egress["podSelector"]["matchLabels"]["app.kubernetes.io/instance"], "paceline");
    let rules = egress["egress"].as_array().unwrap();
    let ports = |r: &Value| -> Vec<i64> {
        r["ports"].as_array().into_iter().flatten().filter_map(|p| p["port"].as_i64()).collect()
    };
    assert_eq!(ports(&rules[0]), [53, 53], "DNS");
    assert_eq!(ports(&rules[1]), [5432, 6379, 4222], "the backends");
    let public = rules.iter().find(|r| r["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0").expect("public addresses");
    let except: Vec<&str> =
        public["to"][0]["ipBlock"]["except"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    for private in ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8", "100.64.0.0/10"] {
        assert!(except.contains(&private), "{private} is not public");
    }
    assert!(rules.iter().all(|r| r.get("ports").is_some() || r["to"].is_array()), "no rule opens everything");
    // The attendant and the Chatwoot bridge open stored secrets; they get no admin token.
    for role in ["attendant", "chatwoot"] {
        let d =
            &find(manifests, "Deployment", &format!("paceline-{role}"))["spec"]["template"]["spec"]["containers"][0];
        let names: Vec<&str> = d["env"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
        assert!(
            names.contains(&"PACELINE_SECRETS_KEY") && !names.contains(&"PACELINE_ADMIN_TOKEN"),
            "{role} {names:?}"
        );
    }
    // No CRDs offline: no ServiceMonitor or PrometheusRule unless forced.
    assert!(!default.iter().any(|k| k.starts_with("ServiceMonitor") || k.starts_with("PrometheusRule")));
    let minimal = kinds("minimal");
    assert!(!minimal.iter().any(|k| k.starts_with("Job/")
        || k.starts_with("HorizontalPodAutoscaler/")
        || k.starts_with("PodDisruptionBudget/")
        || k.starts_with("Secret/")));
    let everything = kinds("everything");
    for k in [
        "Deployment/paceline-netsim",
        "Service/paceline-netsim",
        "Ingress/paceline",
        "NetworkPolicy/paceline-api",
        "NetworkPolicy/paceline-backends",
        "NetworkPolicy/paceline-netsim",
        "ServiceMonitor/paceline",
        "PrometheusRule/paceline",
        "Deployment/paceline-console",
        "Service/paceline-console",
        "Ingress/paceline-console",
        "NetworkPolicy/paceline-console",
    ] {
        assert!(everything.contains(k), "everything-on has {k}");
    }
    assert!(!default.contains("Deployment/paceline-console"), "the console is optional");
    assert_eq!(summary["refused"].as_array().unwrap().len(), 7);

    // Each role as rendered: probes on the metrics port, grace from the shutdown times,
    // and an environment the code loads and validates for its role.
    let secrets = BTreeMap::from([
        ("admin-token", "pl_admin_0123456789abcdefghijklmnopqrstuvwxyz"),
        ("secrets-key", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="),
        ("database-url", "postgres://paceline:secret@postgres:5432/paceline"),
        ("redis-url", "redis://redis:6379"),
        ("nats-url", "nats://nats:4222"),
        ("access-key-id", "AKIAEXAMPLE"),
        ("secret-access-key", "example-secret"),
    ]);
    for (scenario, api_grace) in [("default", 40), ("everything", 45)] {
        let manifests = scenarios[scenario]["manifests"].as_array().unwrap();
        for (role, grace) in
            [("api", api_grace), ("worker", 20), ("dispatcher", 13), ("attendant", 10), ("chatwoot", 10)]
        {
            let d = find(manifests, "Deployment", &format!("paceline-{role}"));
            let pod = &d["spec"]["template"]["spec"];
            assert_eq!(pod["terminationGracePeriodSeconds"], grace, "{scenario} {role}");
            assert_eq!(pod["automountServiceAccountToken"], false);
            let c = &pod["containers"][0];
            assert_eq!(c["args"], json!([role]));
            assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
            for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
                assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{role} {probe}");
            }
            let env = container_env(manifests, c, &secrets);
            let config = load_config(&env);
            let r = match role {
                "api" => Role::Api,
                "attendant" => Role::Attendant,
                "chatwoot" => Role::Chatwoot,
                "worker" => Role::Worker,
                _ => Role::Dispatcher,
            };
            config.validate(r).unwrap_or_else(|e| panic!("{scenario} {role}: {e}"));
            assert!(!config.migrate_on_start, "pods wait for the migration Job");
            assert_eq!(config.metrics_addr.port(), 9464);
            if scenario == "everything" {
                assert_eq!(config.pacing.default_min_interval_ms, 3000);
                assert_eq!(config.api.trusted_proxies.len(), 2);
                assert_eq!(config.pacing.jitter, 0.5);
                assert!(config.metrics.per_instance);
                assert_eq!(config.api.drain.as_secs(), 10);
                assert_eq!(config.public_url.as_ref().map(|u| u.as_str()), Some("https://gw.example.com/"));
                assert_eq!(config.network, shared::config::Network::Sim);
                assert_eq!(config.netsim.url.as_str(), "http://paceline-netsim:8790/");
                assert_eq!(config.webhooks.timeout.as_secs(), 20, "a former flat name still reaches its key");
                // Media in a bucket, its keys from the Secret the values name, in every role.
                assert_eq!(config.media_store.backend, shared::config::section::MediaBackend::S3);
                assert_eq!(config.media_store.bucket.as_deref(), Some("paceline-media"));
                assert_eq!(env.get("AWS_ACCESS_KEY_ID").map(String::as_str), Some("AKIAEXAMPLE"), "{role}");
                assert!(env.contains_key("AWS_SECRET_ACCESS_KEY"), "{role}");
            } else {
                assert!(!env.contains_key("AWS_ACCESS_KEY_ID"), "the pod's identity by default");
            }
        }
        if scenario == "everything" {
            // The console: the API's Service as its API, sealed sessions, no admin token.
            let pod = &find(manifests, "Deployment", "paceline-console")["spec"]["template"]["spec"];
            let c = &pod["containers"][0];
            assert_eq!(c["args"], json!(["console"]));
            assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/healthz");
            let env = container_env(manifests, c, &secrets);
            assert!(!env.contains_key("PACELINE_ADMIN_TOKEN"), "{env:?}");
            let config = load_config(&env);
            config.validate(Role::Console).unwrap_or_else(|e| panic!("console: {e}"));
            assert_eq!(config.console.api_url.as_str(), "http://paceline/");
            assert_eq!(config.console.listen_addr.to_string(), "0.0.0.0:8789");
            let api_policy = &find(manifests, "NetworkPolicy", "paceline-api")["spec"]["ingress"];
            assert!(api_policy.to_string().contains("\"console\""), "the console reaches the API: {api_policy}");
        }
        let api = find(manifests, "Deployment", "paceline-api");
        let pre_stop = &api["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"];
        assert_eq!(pre_stop, &json!(["sleep", "5"]));
    }
    // helm test calls /readyz and /v1/me.
    let test = &scenarios["default"]["tests"][0];
    let script = test["spec"]["containers"][0]["args"][0].as_str().unwrap();
    assert!(script.contains("/readyz") && script.contains("/v1/me"), "{script}");
}
