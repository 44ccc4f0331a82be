"""The pipeline end to end (#38 item 3): N paired instances at their floors, each with a
webhook to a local sink, fed for D minutes by loadtest/src/pipeline_feed.rs, then
drained. Reports, from the three ends (Postgres for what was accepted, netsim for what
was sent, the sink for what was delivered):

- accepted = sent = delivered (each send's `message.queued` and `message.sent`);
- per minute: sends/s, deliveries/s and their ratio (the dispatcher keeps up at >= 2),
  event-to-arrival p50/p99 at the sink, and the backlog (messages queued, deliveries
  pending) so a growing one shows;
- the pacing error of the gaps between one instance's sends;
- CPU per process, per minute and on average.

Stdlib only; run by loadtest/pipeline.sh against a running local cluster and sink.
"""

import concurrent.futures as cf
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import ltlib
from ltlib import call

API = os.environ.get("API", "http://127.0.0.1:8787")
NETSIM = os.environ.get("NETSIM", "http://127.0.0.1:8790")
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
SINK = os.environ["SINK_URL"]
N = int(os.environ.get("INSTANCES", "2000"))
MINUTES = float(os.environ.get("MINUTES", "10"))
INTERVAL_MS = int(os.environ.get("MIN_INTERVAL_MS", "1000"))
HEAD = int(os.environ.get("HEAD", "5"))
ENDPOINTS = int(os.environ.get("ENDPOINTS", str(N)))
RECIPIENT = "5511900000000"
DB = os.environ["PACELINE_DATABASE_URL"]
SCHEMA = os.environ.get("PACELINE_NAMESPACE__DATABASE_SCHEMA")
PSQL = os.path.join(os.environ.get("PL_PG_BIN", "/usr/bin"), "psql")
EVENTS = ["message.queued", "message.sent"]
SUBJECT_PREFIX = os.environ.get("PACELINE_NAMESPACE__SUBJECT_PREFIX", "").upper().replace("-", "_")


def db(query):
    return ltlib.sql(DB, query, SCHEMA, PSQL)


def backlog():
    """(messages queued or in flight, deliveries pending) right now."""
    q = db("SELECT count(*) FROM messages WHERE status IN ('queued', 'in_flight')")[0][0]
    d = db("SELECT count(*) FROM webhook_deliveries WHERE state = 'pending'")[0][0]
    return int(q), int(d)


def relay_lag():
    """The relay's lag (s: now minus the last published event's creation), from the dispatcher."""
    try:
        text = urllib.request.urlopen("http://127.0.0.1:9481/metrics", timeout=10).read().decode()
    except OSError:
        return float("nan")
    return ltlib.metric_sum(text, "paceline_events_relay_lag_seconds", float("nan"))


def fanout_pending():
    """Events in the stream the fan-out has not taken yet, and taken but not acked (NATS's monitor)."""
    port = os.environ.get("PL_NATS_MONITOR_PORT", "28222")
    try:
        jsz = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/jsz?consumers=true", timeout=10).read())
    except (OSError, ValueError):
        return -1, -1
    for acc in jsz.get("account_details", []):
        for st in acc.get("stream_detail", []):
            for c in st.get("consumer_detail", []) or []:
                if c.get("name") == "webhook-fanout" and st.get("name", "").startswith(SUBJECT_PREFIX):
                    return c.get("num_pending", 0), c.get("num_ack_pending", 0)
    return -1, -1


def sink_stats():
    return ltlib.sink_stats(SINK)


def main():
    ltlib.run_roles(run)


def run(procs, worker, dispatcher, roles):
    call("POST", f"{NETSIM}/control/phones", {"number": RECIPIENT})
    body = {"min_interval_ms": INTERVAL_MS, "max_per_minute": 60 * 1000 // INTERVAL_MS}
    fleet, connected, took = ltlib.pair_fleet(API, NETSIM, ADMIN, N, "pipeline", body)
    print(f"    {connected} of {N} instances connected in {took:.1f}s")
    if connected < N:
        sys.exit("not every instance connected")

    # Each instance's webhook at an endpoint URL of its own (as many tenants' endpoints
    # are), or ENDPOINTS URLs shared round robin: the dispatcher runs each URL's
    # deliveries with webhooks.endpoint_concurrency (8) at once.
    def hook(i):
        inst, token, _ = fleet[i]
        url = f"{SINK}/fast/{i % ENDPOINTS}"
        call("POST", f"{API}/v1/instances/{inst}/webhooks", {"url": url, "events": EVENTS}, token)

    with cf.ThreadPoolExecutor(32) as pool:
        list(pool.map(hook, range(len(fleet))))
    urllib.request.urlopen(urllib.request.Request(f"{SINK}/reset", method="POST"), timeout=10).read()
    feed_file = ltlib.feed_file(fleet, "pipeline-feed")
    print(f"    a webhook on each ({min(ENDPOINTS, N)} endpoint URLs); feeding {N} instances for {MINUTES:g} min ({HEAD} queued on each first)")

    inbox = ltlib.Inbox(NETSIM, RECIPIENT)
    minutes = []  # one row per minute of the feed
    feeding = threading.Event()
    feeding.set()

    def observe():
        sent0, t_prev = inbox.read(), time.time()
        delivered_prev = sink_stats()["count"]
        while feeding.is_set():
            cpu = ltlib.cpu_by_process(60, roles)  # blocks for the minute
            now, sent = time.time(), inbox.read()
            delivered = sink_stats()["count"]
            queued, pending = backlog()
            minutes.append({"sends": (sent - sent0) / (now - t_prev),
                            "deliveries": (delivered - delivered_prev) / (now - t_prev),
                            "queued": queued, "pending": pending, "cpu": cpu, "end": now,
                            "relay_lag": relay_lag(), "stream": fanout_pending()})
            sent0, delivered_prev, t_prev = sent, delivered, now

    observer = threading.Thread(target=observe)
    observer.start()
    env = dict(os.environ, FEED_FILE=feed_file, RECIPIENT=RECIPIENT, INTERVAL_MS=str(INTERVAL_MS),
               DURATION_S=str(int(MINUTES * 60)), HEAD=str(HEAD), API=API)
    feed = json.loads(subprocess.run([os.environ["FEED_BIN"]], env=env, capture_output=False,
                                     stdout=subprocess.PIPE, text=True, check=True).stdout)
    feed_end = time.time()
    feeding.clear()
    observer.join()
    # Minutes that ended after the feed stopped are the drain, not the pipeline at pace.
    drain = [m for m in minutes if m["end"] > feed_end + 5]
    minutes = [m for m in minutes if m["end"] <= feed_end + 5]
    os.unlink(feed_file)
    print(f"    fed {feed['accepted'] - feed['head']} texts at {feed['fed_per_s']:.0f}/s; accept p50 "
          f"{feed['p50_ms']:.1f} ms, p99 {feed['p99_ms']:.1f} ms; not accepted: {feed['failed'] or 'none'}")

    # Drain: everything accepted is sent and every event delivered, or the deadline says why not.
    accepted = int(db("SELECT count(*) FROM messages")[0][0])
    t_drain, deadline = time.time(), time.time() + 600
    while time.time() < deadline:
        s = sink_stats()
        if inbox.read() >= accepted and s["unique"] >= 2 * accepted:
            break
        time.sleep(5)
    s = sink_stats()
    per_minute = json.loads(urllib.request.urlopen(f"{SINK}/stats/minutes", timeout=30).read())
    statuses = dict(db("SELECT status, count(*) FROM messages GROUP BY status"))
    print(f"    drained in {time.time() - t_drain:.0f}s after the feed stopped")
    print()
    print(f"accepted {accepted} (the feed counted {feed['accepted']}), sent {len(inbox.received)} "
          f"(netsim saw {inbox.duplicates} duplicates), delivered {s['unique']} events of {2 * accepted} "
          f"({', '.join(f'{k} {v}' for k, v in s['by_type'].items())}; {s['duplicates']} delivered twice)")
    print(f"messages by status: {statuses}")
    attempts = db("SELECT attempts, count(*) FROM webhook_deliveries GROUP BY 1 ORDER BY 1")
    errors = db("SELECT coalesce(last_error, '-'), count(*) FROM webhook_deliveries WHERE attempts > 1 "
                "GROUP BY 1 ORDER BY 2 DESC LIMIT 5")
    print(f"deliveries by attempts: {dict(attempts)}; the retried ones' last errors: {dict(errors) or 'none'}")
    ok = len(inbox.received) == accepted and s["unique"] == 2 * accepted and feed["accepted"] == accepted

    # Per minute of the feed (the first is the ramp: instances still in their grace).
    print("minute  sends/s  deliveries/s  ratio  event->arrival p50/p99 ms  queued  pending  relay lag s  "
          "stream not taken/unacked  CPU api+netsim/worker/dispatcher/postgres")
    arrivals = {r["minute"]: r for r in per_minute}
    for k, m in enumerate(minutes, start=1):
        a = arrivals.get(int(m["end"] - 60) // 60 * 60, {})
        ratio = m["deliveries"] / m["sends"] if m["sends"] else float("nan")
        c = m["cpu"]
        print(f"{k:6d}  {m['sends']:7.0f}  {m['deliveries']:12.0f}  {ratio:5.2f}  "
              f"{a.get('p50_ms', float('nan')):10.0f} / {a.get('p99_ms', float('nan')):<10.0f}  "
              f"{m['queued']:6d}  {m['pending']:7d}  {m['relay_lag']:11.2f}  "
              f"{m['stream'][0]:>14} / {m['stream'][1]:<8}  " + " / ".join(
                  f"{c.get(k, 0):.0f}%" for k in ("api+netsim", "worker", "dispatcher", "postgres")))
    for m in drain:
        print(f" drain  {m['sends']:7.0f}  {m['deliveries']:12.0f}         (the feed had stopped)      "
              f"{m['queued']:6d}  {m['pending']:7d}")
    steady = minutes[1:] or minutes
    if steady:
        sends = sorted(m["sends"] for m in steady)
        deliveries = sorted(m["deliveries"] for m in steady)
        print(f"after the first minute: sends/s median {sends[len(sends) // 2]:.0f} (floor allows "
              f"{N * 1000 / INTERVAL_MS:.0f}), deliveries/s median {deliveries[len(deliveries) // 2]:.0f}, "
              f"backlog queued {steady[0]['queued']} -> {steady[-1]['queued']}, pending "
              f"{steady[0]['pending']} -> {steady[-1]['pending']}")
        lat = [arrivals[k] for k in sorted(arrivals)][1:len(minutes)]
        if lat:
            print(f"event->arrival p99 by minute after the first: worst {max(r['p99_ms'] for r in lat):.0f} ms, "
                  f"median {sorted(r['p99_ms'] for r in lat)[len(lat) // 2]:.0f} ms (goal <= 100 ms)")
        names = sorted({n for m in steady for n in m["cpu"]}, key=lambda n: -sum(m["cpu"].get(n, 0) for m in steady))
        print("CPU per process, mean of the minutes after the first (200% = both cores):")
        for name in names:
            mean = sum(m["cpu"].get(name, 0) for m in steady) / len(steady)
            if mean >= 1:
                print(f"    cpu {name:<16} {mean:5.0f}%")
    print("memory (RSS now, peak) in MiB: " + ", ".join(
        f"{name} {st['VmRSS']:.0f}, {st['VmHWM']:.0f}" for name, st in
        ((name, ltlib.proc_status(pid)) for pid, name in roles.items())))
    print(f"event->arrival over the whole run: p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms, max {s['max_ms']:.0f} ms")
    by_sender = {}
    for sender, t in inbox.received:
        by_sender.setdefault(sender, []).append(t)
    gaps = []
    for ts in by_sender.values():
        ts.sort()
        gaps += [(b - a) * 1000 - INTERVAL_MS for a, b in zip(ts, ts[1:])]
    print(f"pacing error (real gap - floor {INTERVAL_MS} ms): p50 {ltlib.pct(gaps, 50):.0f} ms, "
          f"p99 {ltlib.pct(gaps, 99):.0f} ms, max {max(gaps) if gaps else float('nan'):.0f} ms over {len(gaps)} gaps")
    if not ok:
        sys.exit("accepted, sent and delivered differ")


if __name__ == "__main__":
    main()
