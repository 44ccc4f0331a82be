"""A rolling upgrade of the workers (see rolling-upgrade.sh). Stdlib and psql."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import ltlib
from ltlib import call

API = "http://127.0.0.1:8787"
NETSIM = "http://127.0.0.1:8790"
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
DB = os.environ["PACELINE_DATABASE_URL"]
SCHEMA = os.environ["PACELINE_NAMESPACE__DATABASE_SCHEMA"]
N = int(os.environ.get("INSTANCES", "3000"))
W = int(os.environ.get("WORKERS", "3"))
GAP_MS = int(os.environ.get("GAP_MS", "10000"))
FEED_S = int(os.environ.get("FEED_S", "360"))
SETTLE_S = int(os.environ.get("SETTLE_S", "30"))
RUN = str(int(time.time()))
RECIPIENT = f"55118{int(RUN) % 1000000:06d}"
# warn, and the worker crate's few info lines (its id, claims, handoffs).
WORKERS = ltlib.Workers("warn,worker=info")
held = WORKERS.held


def q(query):
    return ltlib.sql(DB, query, schema=f'"{SCHEMA}"')


def balanced(workers, within):
    """Seconds until each of `workers` holds at most its share and every instance is
    connected (None after `within`)."""
    share, t0 = -(-N // len(workers)), time.time()
    while time.time() - t0 < within:
        counts = [held(k) for k in workers]
        if max(counts) <= share and sum(counts) == N and ltlib.connected(API, ADMIN) == N:
            return time.time() - t0
        time.sleep(0.25)
    return None


def ready(k, within=60):
    """Waits until worker k's /readyz answers 200 (the chart's readiness probe)."""
    t0 = time.time()
    while time.time() - t0 < within:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{9480 + k}/readyz", timeout=2).status == 200:
                return time.time() - t0
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"worker {k} not ready within {within} s")


def owned_by(k):
    """The instances worker k owns (its id from its log; ownership from Postgres)."""
    wid = None
    with open(WORKERS.log(k)) as f:
        for line in f:
            if "worker started" in line:
                wid = json.loads(line)["worker_id"]
    return {i for (i,) in q(f"SELECT id FROM instances WHERE owner_worker = '{wid}'")}


def handoffs(ids, since, stops):
    """Each release of a session in the window, from the instances' `instance.state` events
    (written in the transactions that made the changes): (kind, seconds until the next
    claim, seconds until connected again). kind is "stop" for a release of an instance a
    stopping worker held, while it stopped (`stops`: [(from, to, instances)], Unix
    seconds), else "rebalance" (a worker over its share handing one over)."""
    rows = q("SELECT instance_id, payload->'data'->>'state', extract(epoch FROM created_at) FROM outbox "
             f"WHERE type = 'instance.state' AND created_at >= to_timestamp({since}) "
             "ORDER BY instance_id, created_at, id")
    out, last = [], {}
    for inst, state, at in rows:
        if inst not in ids:
            continue
        at = float(at)
        r = last.get(inst)
        if state == "disconnected":
            last[inst] = [at, None]
        elif state == "connecting" and r and r[1] is None:
            r[1] = at
        elif state == "connected" and r and r[1] is not None:
            stop = any(a <= r[0] <= b and inst in held_ for a, b, held_ in stops)
            out.append(("stop" if stop else "rebalance", r[1] - r[0], at - r[0]))
            del last[inst]
    return out, len(last)


def inbox_texts(number):
    texts, offset = [], 0
    while True:
        page = call("GET", f"{NETSIM}/control/phones/{number}/inbox?offset={offset}&limit=5000")["messages"]
        texts += [m.get("text") for m in page]
        offset += len(page)
        if len(page) < 5000:
            return texts


def figures(xs):
    return f"p50 {ltlib.pct(xs, 50):.2f} s, p99 {ltlib.pct(xs, 99):.2f} s, max {max(xs):.2f} s" if xs else "none"


def main():
    for k in range(W):
        WORKERS.start(k)
    t = time.time()
    fleet, up, took = ltlib.pair_fleet(API, NETSIM, ADMIN, N, "ru")
    if up < N:
        sys.exit(f"only {up} of {N} instances connected after pairing")
    print(f"paired {N} instances in {took:.0f} s")
    if balanced(range(W), 300) is None:
        sys.exit(f"not balanced after pairing: {[held(k) for k in range(W)]}")
    print(f"{N} instances on {W} workers: {[held(k) for k in range(W)]}")
    call("POST", f"{NETSIM}/control/phones", {"number": RECIPIENT})

    # Texts fed to every instance, one every GAP_MS, through the whole upgrade.
    feed_file = ltlib.feed_file(fleet, "rolling-feed")
    env = dict(os.environ, FEED_FILE=feed_file, RECIPIENT=RECIPIENT, INTERVAL_MS=str(GAP_MS), HEAD="2",
               DURATION_S=str(FEED_S), CONCURRENCY="1024")
    feed = subprocess.Popen([os.environ["FEED_BIN"]], env=env, stdout=subprocess.PIPE, text=True)
    print(f"feeding each instance a text every {GAP_MS} ms for {FEED_S} s ({N * 1000 / GAP_MS:.0f}/s); "
          f"the upgrade starts in {SETTLE_S} s")
    time.sleep(SETTLE_S)

    # The chart's rolling update (maxSurge 1, maxUnavailable 0): a new worker starts; once
    # it is ready an old one gets SIGTERM; the next new one starts once the old has gone.
    since = float(q("SELECT extract(epoch FROM now())")[0][0])
    stops = []
    for k in range(W):
        new = W + k
        WORKERS.start(new)
        up = ready(new)
        victims = owned_by(k)
        t0 = time.time()
        os.kill(WORKERS.process(k).pid, signal.SIGTERM)
        WORKERS.process(k).wait(timeout=120)
        t1 = time.time()
        stops.append((t0 - 0.05, t1 + 0.05, victims))
        print(f"step {k + 1}: worker {new} ready in {up:.1f} s; worker {k} (held {len(victims)}) handed over "
              f"and exited in {t1 - t0:.2f} s")
    back = balanced(range(W, 2 * W), 300)
    if back is None:
        sys.exit(f"not balanced within 300 s of the last step: {[held(j) for j in range(W, 2 * W)]}")
    print(f"balanced again {[held(j) for j in range(W, 2 * W)]}, every instance connected, {back:.1f} s after "
          "the last step")

    if feed.poll() is not None:
        print("the feed ended before the upgrade did: raise FEED_S")
    out, _ = feed.communicate(timeout=FEED_S + 600)
    os.unlink(feed_file)
    fed = json.loads(out.strip().splitlines()[-1])
    print(f"fed {fed['accepted']} texts at {fed['fed_per_s']:.0f}/s (accept p50 {fed['p50_ms']:.0f} ms, "
          f"p99 {fed['p99_ms']:.0f} ms); not accepted: {fed['failed'] or 'none'}")

    ids = {x[0] for x in fleet}
    moves, open_ = handoffs(ids, since, stops)
    for kind in ("stop", "rebalance"):
        ms = [m for m in moves if m[0] == kind]
        print(f"{kind} handoffs: {len(ms)}; without a lease (release to claim): {figures([m[1] for m in ms])}; "
              f"session back (release to connected): {figures([m[2] for m in ms])}")
    print(f"released and not connected again: {open_}")

    # Every accepted text ends sent, and netsim holds each once.
    accepted, t = fed["accepted"], time.time()
    while time.time() - t < 600:
        left = int(q(f"SELECT count(*) FROM messages WHERE to_jid = '{RECIPIENT}@s.whatsapp.net' "
                     "AND status NOT IN ('sent', 'failed')")[0][0])
        if left == 0:
            break
        time.sleep(5)
    counts = dict((s, int(n)) for s, n in q(f"SELECT status, count(*) FROM messages "
                                             f"WHERE to_jid = '{RECIPIENT}@s.whatsapp.net' GROUP BY status"))
    texts = inbox_texts(RECIPIENT)
    lost = accepted - len(set(texts))
    dups = len(texts) - len(set(texts))
    print(f"accepted {accepted}; in Postgres by status {counts}; netsim received {len(texts)}: lost {lost}, "
          f"duplicates {dups}")
    if lost or dups or open_ or counts.get("sent", 0) != accepted:
        sys.exit(1)


try:
    main()
finally:
    WORKERS.stop_all()
