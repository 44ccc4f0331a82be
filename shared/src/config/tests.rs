use super::*;
use crate::auth::ADMIN_TOKEN_PREFIX;
use std::time::Duration;

use figment::Jail;

fn load_in(jail_env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let mut out = None;
    Jail::expect_with(|jail| {
        for (k, v) in jail_env {
            jail.set_env(k, v);
        }
        out = Some(Config::load(None));
        Ok(())
    });
    out.unwrap()
}

#[test]
fn environment_overrides_defaults() {
    let c = load_in(&[
        ("PACELINE_LISTEN_ADDR", "0.0.0.0:9000"),
        ("PACELINE_ALLOW_PRIVATE_TARGETS", "1"),
        ("PACELINE_TRUSTED_PROXIES", "10.0.0.0/8, 192.168.1.1/32"),
        ("PACELINE_NETWORK", "sim"),
        ("PACELINE_BIN", "/ignored"),
    ])
    .unwrap();
    assert_eq!(c.listen_addr.to_string(), "0.0.0.0:9000");
    assert!(c.allow_private_targets);
    assert_eq!(c.api.trusted_proxies.len(), 2);
    assert_eq!(c.network, Network::Sim);
    assert_eq!(c.metrics_addr.to_string(), "127.0.0.1:9464");
}

#[test]
fn file_then_environment() {
    Jail::expect_with(|jail| {
        jail.create_file("p.toml", "[log]\nlevel = \"debug\"\n[api]\ndrain_ms = 7\nrpc_timeout_ms = 8\n")?;
        jail.set_env("PACELINE_API__DRAIN_MS", "9");
        let c = Config::load(Some(Path::new("p.toml"))).unwrap();
        assert_eq!(c.log.level, "debug");
        assert_eq!(c.api.drain, Duration::from_millis(9));
        assert_eq!(c.api.rpc_timeout, Duration::from_millis(8));
        Ok(())
    });
}

/// Sections nest in the environment with `__`; the flat names of earlier releases still
/// count (in the environment and in a file), and a sectioned key given too wins.
#[test]
fn sections_in_the_environment_and_the_old_flat_names() {
    let c = load_in(&[
        ("PACELINE_PACING__JITTER", "0.5"),
        ("PACELINE_WORKER__LEASE_TTL_MS", "7000"),
        ("PACELINE_RISK__AUTO_PAUSE", "no"),
        ("PACELINE_API__TRUSTED_PROXIES", "10.0.0.0/8"),
        ("PACELINE_WEBHOOK_TIMEOUT_MS", "1234"),
        ("PACELINE_LOG_LEVEL", "warn"),
        ("PACELINE_DATABASE_SCHEMA", "t1"),
        ("PACELINE_DATABASE_MAX_CONNECTIONS", "7"),
        ("PACELINE_DATABASE_URL", "postgres://u@db.example/x"),
        ("PACELINE_GROUP_JOINS_PER_DAY", "3"),
        ("PACELINE_GROUPS__JOINS_PER_DAY", "4"),
        ("PACELINE_WEBHOOKS__RETRY_SPAN_MS", "2h 30m"),
        ("PACELINE_API__RPC_TIMEOUT_MS", "250ms"),
    ])
    .unwrap();
    assert_eq!(c.pacing.jitter, 0.5);
    assert_eq!(c.worker.lease_ttl, Duration::from_millis(7000));
    assert!(!c.risk.auto_pause);
    assert_eq!(c.api.trusted_proxies.len(), 1);
    assert_eq!(c.webhooks.timeout, Duration::from_millis(1234));
    assert_eq!(c.log.level, "warn");
    assert_eq!(c.namespace.database_schema.as_deref(), Some("t1"));
    assert_eq!(c.database.max_connections, 7);
    assert_eq!(c.groups.joins_per_day, 4, "the sectioned key wins over its old name");
    assert_eq!(c.webhooks.retry_span, Duration::from_secs(9_000), "durations take humantime strings");
    assert_eq!(c.api.rpc_timeout, Duration::from_millis(250));
    let e = load_in(&[("PACELINE_WORKER__LEASE_TTL_MS", "soon")]).unwrap_err().to_string().to_lowercase();
    assert!(e.contains("lease_ttl_ms") && e.contains("5s"), "{e}");
    assert_eq!(c.database_url, "postgres://u@db.example/x", "a top-level key that starts like a section stays there");
    Jail::expect_with(|jail| {
        jail.create_file("old.toml", "lease_ttl_ms = 800\npacing_jitter = 0.1\n[api]\ndrain_ms = \"1m\"\n")?;
        let c = Config::load(Some(Path::new("old.toml"))).unwrap();
        assert_eq!((c.worker.lease_ttl, c.pacing.jitter), (Duration::from_millis(800), 0.1));
        assert_eq!(c.api.drain, Duration::from_secs(60));
        Ok(())
    });
}

/// Every old flat name maps to a key that exists: set each to a value of its type and
/// read it back under its section.
#[test]
fn every_alias_reaches_a_sectioned_key() {
    let defaults = serde_json::to_value(Config::default()).unwrap();
    for (old, new) in ALIASES {
        let (section, key) = new.split_once('.').unwrap();
        assert!(defaults.get(*old).is_none(), "{old} is still a top-level key");
        assert!(defaults[section].get(key).is_some(), "{old} maps to {new}, which is not a key");
    }
    let mut seen = std::collections::BTreeSet::new();
    assert!(ALIASES.iter().all(|(old, _)| seen.insert(*old)), "an old name appears twice");
}

#[test]
fn bad_values_are_named() {
    let e = load_in(&[("PACELINE_LISTEN_ADDR", "nope")]).unwrap_err().to_string().to_lowercase();
    assert!(e.contains("listen_addr"), "{e}");
    let e = load_in(&[("PACELINE_ALLOW_PRIVATE_TARGETS", "maybe")]).unwrap_err().to_string().to_lowercase();
    assert!(e.contains("allow_private_targets"), "{e}");
}

#[test]
fn validation_lists_each_problem_without_secrets() {
    let c = Config {
        database_url: "mysql://user:hunter2@db/x".into(),
        admin_token: Some("pl_admin_short".into()),
        pacing: section::Pacing { default_max_per_minute: 0, ..Default::default() },
        ..Config::default()
    };
    let e = c.validate(Role::Api).unwrap_err().to_string();
    for needle in [
        "database_url",
        "redis_url is required",
        "nats_url is required",
        "admin_token",
        "pacing.default_max_per_minute",
    ] {
        assert!(e.contains(needle), "{needle} missing from {e}");
    }
    assert!(!e.contains("hunter2"));
    assert!(!e.contains("pl_admin_short"));
}

#[test]
fn a_complete_config_validates() {
    let c = Config {
        database_url: "postgres://u@127.0.0.1/db".into(),
        redis_url: "redis://127.0.0.1:6379".into(),
        nats_url: "nats://127.0.0.1:4222".into(),
        admin_token: Some(format!("{ADMIN_TOKEN_PREFIX}{}", "a".repeat(30))),
        ..Config::default()
    };
    c.validate(Role::Api).unwrap();
    Config::default().validate(Role::Netsim).unwrap();
}

#[test]
fn placeholder_secrets_are_refused_and_the_attendant_needs_no_admin_token() {
    let base = Config {
        database_url: "postgres://u@127.0.0.1/db".into(),
        redis_url: "redis://127.0.0.1:6379".into(),
        nats_url: "nats://127.0.0.1:4222".into(),
        ..Config::default()
    };
    let c = Config { admin_token: Some("pl_admin_CHANGE_ME_to_40_random_characters_0000".into()), ..base.clone() };
    for role in [Role::Api, Role::Worker, Role::Attendant] {
        let e = c.validate(role).unwrap_err().to_string();
        assert!(e.contains("placeholder") && !e.contains("CHANGE_ME"), "{e}");
    }
    let key = Some("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=".into());
    Config { secrets_key: key.clone(), ..base.clone() }.validate(Role::Attendant).unwrap();
    let e = base.validate(Role::Attendant).unwrap_err().to_string();
    assert!(e.contains("secrets_key"), "{e}");
    assert!(Config { secrets_key: key, ..base }.validate(Role::Api).is_err(), "the API still needs the admin token");
}

/// One key from the environment alone: its sectioned name, else its former flat name.
#[test]
fn one_key_from_the_environment() {
    Jail::expect_with(|jail| {
        jail.set_env("PACELINE_LOG_LEVEL", "debug");
        assert_eq!(Config::from_env::<String>("log.level").as_deref(), Some("debug"));
        jail.set_env("PACELINE_LOG__LEVEL", "error");
        assert_eq!(Config::from_env::<String>("log.level").as_deref(), Some("error"));
        Ok(())
    });
}
