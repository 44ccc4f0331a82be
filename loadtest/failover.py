"""Failover after SIGKILL and SIGTERM of a worker (see failover.sh). Stdlib and psql."""

import concurrent.futures as cf
import datetime
import json
import os
import signal
import subprocess
import sys
import time

import ltlib
from ltlib import call

API = "http://127.0.0.1:8787"
NETSIM = "http://127.0.0.1:8790"
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
N = int(os.environ.get("INSTANCES", "600"))
W = int(os.environ.get("WORKERS", "3"))
SCHEMA = os.environ["PACELINE_NAMESPACE__DATABASE_SCHEMA"]
RUN = str(int(time.time()))
RECIPIENT = "5511900000002"
GAP_MS = 4000
SENDS = 45
# warn, and the worker crate's few info lines (its id, claims, handoffs).
WORKERS = ltlib.Workers("warn,worker=info")
held = WORKERS.held


def worker_id(k):
    for _ in range(100):
        with open(WORKERS.log(k)) as f:
            for line in f:
                if "worker started" in line:
                    return json.loads(line)["worker_id"]
        time.sleep(0.1)
    sys.exit(f"worker {k} never logged its id")


def owners():
    """instance id -> (owner worker, state), from Postgres."""
    out = subprocess.run(["psql", os.environ["PACELINE_DATABASE_URL"], "-XAtq", "-F", "\t", "-c",
                          f'SELECT id, coalesce(owner_worker, \'\'), state FROM "{SCHEMA}".instances'],
                         capture_output=True, text=True, check=True).stdout
    return {i: (o, s) for i, o, s in (line.split("\t") for line in out.splitlines() if line)}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def figures(name, xs, total):
    if len(xs) < total:
        return f"{name}: only {len(xs)} of {total}"
    return f"{name}: p50 {pct(xs, 50):.2f} s, p99 {pct(xs, 99):.2f} s, max {max(xs):.2f} s"


def parse_ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def failover(k, sig, numbers, label):
    """Stops worker k with `sig`; measures its instances' reopening and first send again."""
    victim = worker_id(k)
    before = owners()
    orphans = {i for i, (o, _) in before.items() if o == victim}
    t0 = time.time()
    os.kill(WORKERS.process(k).pid, sig)
    reopened = {}
    while len(reopened) < len(orphans) and time.time() - t0 < 120:
        now = owners()
        t = time.time() - t0
        for i in orphans - reopened.keys():
            o, s = now[i]
            if o and o != victim and s == "connected":
                reopened[i] = t
        time.sleep(0.1)
    WORKERS.process(k).wait(timeout=60)
    # First send of each orphan received after the stop (netsim's clock is this machine's).
    first = {}
    deadline = time.time() + 120
    while len(first) < len(orphans) and time.time() < deadline:
        inbox = call("GET", f"{NETSIM}/control/phones/{RECIPIENT}/inbox", None, None)["messages"]
        for m in inbox:
            i = numbers.get(m["from"])
            if i in orphans and i not in first:
                at = parse_ts(m["received_at"]) - t0
                if at > 0.2:
                    first[i] = at
        time.sleep(2)
    print(f"{label}: worker {k} held {len(orphans)} instances")
    print(f"  {figures('sessions open again on another worker', list(reopened.values()), len(orphans))}")
    print(f"  {figures('sending again', list(first.values()), len(orphans))}")


def main():
    for k in range(W):
        WORKERS.start(k)
    for k in range(W):
        worker_id(k)
    call("POST", f"{NETSIM}/control/phones", {"number": RECIPIENT})
    nums = [f"553{int(RUN) % 1000:03d}{i:07d}" for i in range(N)]
    with cf.ThreadPoolExecutor(32) as pool:
        pairs = list(pool.map(lambda i: ltlib.pair(API, NETSIM, ADMIN, nums[i], {"name": f"fo-{RUN}-{i}"}), range(N)))
    numbers = {nums[i]: pairs[i][0] for i in range(N)}
    share = -(-N // W)
    t = time.time()
    while time.time() - t < 300:
        counts = [held(k) for k in range(W)]
        if max(counts) <= share and sum(counts) == N and ltlib.connected(API, ADMIN) == N:
            break
        time.sleep(1)
    print(f"{N} instances on {W} workers: {[held(k) for k in range(W)]}")

    def queue(p):
        inst, token = p
        call("PATCH", f"{API}/v1/instances/{inst}", {"min_interval_ms": GAP_MS, "max_per_minute": 60000 // GAP_MS}, token)
        for j in range(SENDS):
            call("POST", f"{API}/v1/instances/{inst}/messages",
                 {"to": RECIPIENT, "type": "text", "text": f"fo {RUN} {inst} {j}"}, token)

    with cf.ThreadPoolExecutor(16) as pool:
        list(pool.map(queue, pairs))
    print(f"queued {SENDS} sends on each instance, one every {GAP_MS} ms; waiting until all send")
    t = time.time()
    while time.time() - t < 120:
        inbox = call("GET", f"{NETSIM}/control/phones/{RECIPIENT}/inbox", None, None)["messages"]
        if len({m["from"] for m in inbox}) >= N:
            break
        time.sleep(2)
    failover(0, signal.SIGKILL, numbers, "kill -9")
    failover(1, signal.SIGTERM, numbers, "SIGTERM")
    inbox = call("GET", f"{NETSIM}/control/phones/{RECIPIENT}/inbox", None, None)
    texts = [m.get("text") for m in inbox["messages"] if (m.get("text") or "").startswith(f"fo {RUN} ")]
    print(f"received {len(texts)} sends, duplicates {len(texts) - len(set(texts))} "
          f"(netsim: duplicates {inbox['duplicates']}, re-sends absorbed {inbox['resends_absorbed']})")


try:
    main()
finally:
    WORKERS.stop_all()
