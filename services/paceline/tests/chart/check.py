"""Renders the Helm chart with Helm's own engine (helm-python-sdk embeds Helm v4's Go SDK)
in its default, minimal and everything-on configurations, lints it, validates every
manifest against the Kubernetes schemas of the supported versions (kubernetes-validate,
strict: unknown fields fail), checks that values.schema.json refuses wrong values, and
that k8s/ is the chart's default install. Prints a JSON summary on stdout for the Rust
test (tests/it/chart.rs); exits non-zero naming the first problem.

Environment: CHART (the chart directory), K8S (the k8s/ directory), UPDATE=1 rewrites
k8s/paceline.yaml instead of comparing.
"""

import json
import os
import sys

import helm_python as helm
import kubernetes_validate
import yaml

CHART = os.environ["CHART"]
K8S = os.environ["K8S"]
VERSIONS = ["1.29.0", "1.32.0", "1.35.0"]
# The Prometheus Operator's kinds have no schema in Kubernetes' own.
OPERATOR = "monitoring.coreos.com/v1"

URLS = {
    "database": {"url": "postgres://paceline:secret@postgres:5432/paceline"},
    "redis": {"url": "redis://redis:6379"},
    "nats": {"url": "nats://nats:4222"},
}
SECRETS = {
    "adminToken": {"existingSecret": "paceline-secrets", "existingSecretKey": "admin-token"},
    "secretsKey": {"existingSecret": "paceline-secrets", "existingSecretKey": "secrets-key"},
    "database": {"existingSecret": "paceline-secrets", "existingSecretKey": "database-url"},
    "redis": {"existingSecret": "paceline-secrets", "existingSecretKey": "redis-url"},
    "nats": {"existingSecret": "paceline-secrets", "existingSecretKey": "nats-url"},
}
SCENARIOS = {
    "default": URLS,
    "minimal": {
        **SECRETS,
        "api": {"replicas": 1, "hpa": {"enabled": False}, "pdb": {"enabled": False}},
        "worker": {"replicas": 1, "pdb": {"enabled": False}},
        "dispatcher": {"replicas": 1, "hpa": {"enabled": False}, "pdb": {"enabled": False}},
        "metrics": {"dashboard": {"enabled": False}},
        "topologySpread": {"enabled": False},
        "migrations": {"enabled": False},
        "serviceAccount": {"create": False},
    },
    "everything": {
        **URLS,
        "network": "sim",
        "netsim": {"enabled": True},
        "console": {"enabled": True, "ingress": {"enabled": True, "className": "nginx", "host": "console.example.com"}},
        "ingress": {"enabled": True, "className": "nginx", "host": "gw.example.com"},
        "networkPolicy": {"enabled": True, "apiFrom": [{"namespaceSelector": {}}], "consoleFrom": [{"namespaceSelector": {}}]},
        "metrics": {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
        "config": {
            "pacing": {"default_min_interval_ms": 3000, "jitter": 0.5},
            "api": {"trusted_proxies": ["10.0.0.0/8", "192.168.0.0/16"], "drain_ms": 10000},
            "metrics": {"per_instance": True},
            "log": {"format": "json"},
            "media_store": {"backend": "s3", "bucket": "paceline-media", "region": "eu-west-1"},
            # A flat name of an earlier release: still accepted, as its sectioned key.
            "webhook_timeout_ms": 20000,
        },
        "api": {"extraEnv": [{"name": "RUST_BACKTRACE", "value": "1"}]},
        "mediaStore": {"credentials": {"existingSecret": "paceline-media-keys"}},
        "imagePullSecrets": [{"name": "registry"}],
    },
    # What tests/it/chart/rehearsal.rs starts as local processes: netsim, no pacing grace.
    "rehearsal": {
        **SECRETS,
        "network": "sim",
        "netsim": {"enabled": True},
        "database": {**SECRETS["database"], "maxConnections": 5},
        "config": {
            "pacing": {"grace_min_ms": 0, "grace_max_ms": 0, "ramp_ms": 0},
            "events": {"stream_max_bytes": 16777216},
            "api": {"drain_ms": 1000, "shutdown_timeout_ms": 5000},
            "log": {"level": "warn"},
        },
    },
}
# Values the schema must refuse: (what, values).
REFUSED = [
    ("a string replica count", {**URLS, "api": {"replicas": "two"}}),
    ("an unknown network", {**URLS, "network": "telegram"}),
    ("an unknown config key", {**URLS, "config": {"no_such_key": 1}}),
    ("a config key of the wrong type", {**URLS, "config": {"pacing": {"default_min_interval_ms": "fast"}}}),
    ("an unknown key in a config section", {**URLS, "config": {"pacing": {"no_such_key": 1}}}),
    ("a config key with its own value", {**URLS, "config": {"database_url": "postgres://x"}}),
    ("an unknown top-level key", {**URLS, "replicas": 3}),
]


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def docs(rendered):
    """Every manifest of a render: (template, document), without helm test hooks."""
    out = []
    for path, text in sorted(rendered.items()):
        if "/tests/" in path or path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                out.append((path, doc))
    return out


def main():
    chart = helm.Chart.load(CHART)
    summary = {"scenarios": {}}
    for name, values in SCENARIOS.items():
        chart.validate_schema(values)
        lint = helm.lint(CHART, values, strict=True)
        problems = [m for m in lint.get("messages", []) if m.get("severity", 0) >= 2]
        if problems or lint.get("errors"):
            fail(f"{name}: helm lint: {problems or lint['errors']}")
        rendered = chart.render(values, name="paceline", namespace="paceline", is_install=True)
        manifests = docs(rendered)
        kinds = []
        for path, doc in manifests:
            kinds.append(f"{doc['kind']}/{doc['metadata']['name']}")
            if doc["apiVersion"] == OPERATOR:
                continue
            for version in VERSIONS:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except Exception as e:  # noqa: BLE001 - reported with its manifest
                    fail(f"{name}: {path} ({doc['kind']}) is not valid Kubernetes {version}: {e}")
        tests = [d for p, d in [(p, d) for p, t in rendered.items() if "/tests/" in p for d in yaml.safe_load_all(t) if d]]
        summary["scenarios"][name] = {
            "kinds": sorted(kinds),
            "manifests": [doc for _, doc in manifests],
            "tests": tests,
        }
    refused = []
    for what, values in REFUSED:
        try:
            chart.validate_schema(values)
        except helm.HelmValuesError as e:
            refused.append({"what": what, "error": str(e)})
            continue
        fail(f"values.schema.json accepts {what}")
    summary["refused"] = refused

    # k8s/: the default install with the backends and admin token in one existing Secret.
    values = yaml.safe_load(open(os.path.join(K8S, "values.yaml")))
    rendered = chart.render(values, name="paceline", namespace="paceline", is_install=True)
    text = "# Rendered from helm/paceline with k8s/values.yaml; a test keeps it in sync.\n"
    text += "# Regenerate: PACELINE_UPDATE_K8S=1 cargo nextest run -p paceline chart\n"
    text += "".join(f"---\n{yaml.safe_dump(doc, sort_keys=False)}" for _, doc in docs(rendered))
    target = os.path.join(K8S, "paceline.yaml")
    if os.environ.get("UPDATE") == "1":
        open(target, "w").write(text)
    elif not os.path.exists(target) or open(target).read() != text:
        fail("k8s/paceline.yaml differs from the chart's render: PACELINE_UPDATE_K8S=1 cargo nextest run -p paceline chart")
    json.dump(summary, sys.stdout)


main()
