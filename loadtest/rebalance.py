"""Rebalancing after a worker joins (see rebalance.sh). Stdlib only."""

import concurrent.futures as cf
import os
import sys
import threading
import time

import ltlib
from ltlib import call

API = "http://127.0.0.1:8787"
NETSIM = "http://127.0.0.1:8790"
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
N = int(os.environ.get("INSTANCES", "600"))
W = int(os.environ.get("WORKERS", "3"))
RUN = str(int(time.time()))
RECIPIENT = "5511900000001"
WORKERS = ltlib.Workers()
held = WORKERS.held


def connected():
    return ltlib.connected(API, ADMIN)


def main():
    for k in range(W):
        WORKERS.start(k)
    time.sleep(3)
    call("POST", f"{NETSIM}/control/phones", {"number": RECIPIENT})
    with cf.ThreadPoolExecutor(32) as pool:
        pairs = list(pool.map(lambda i: ltlib.pair(API, NETSIM, ADMIN, f"552{int(RUN) % 1000:03d}{i:07d}",
                                                    {"name": f"rb-{RUN}-{i}"}), range(N)))
    while connected() < N:
        time.sleep(1)
    print(f"{N} instances on {W} workers: {[held(k) for k in range(W)]}")

    # Sends at a steady rate across the instances while the new worker joins.
    sent_ids, stop = [], threading.Event()

    def sender():
        i = 0
        while not stop.is_set():
            inst, token = pairs[i % N]
            m = call("POST", f"{API}/v1/instances/{inst}/messages", {"to": RECIPIENT, "type": "text",
                                                                      "text": f"rb {RUN} {i}"}, token)
            sent_ids.append((inst, token, m["id"]))
            i += 1
            time.sleep(0.02)

    t = threading.Thread(target=sender)
    t.start()
    time.sleep(2)
    t0 = time.time()
    WORKERS.start(W)
    share = -(-N // (W + 1))
    balanced = None
    while time.time() - t0 < 300:
        counts = [held(k) for k in range(W + 1)]
        if max(counts) <= share and sum(counts) == N and connected() == N:
            balanced = time.time() - t0
            break
        time.sleep(0.5)
    time.sleep(2)
    stop.set()
    t.join()
    if balanced is None:
        sys.exit(f"not balanced in 300 s: {[held(k) for k in range(W + 1)]}")
    print(f"a {W + 1}th worker joined: balanced {[held(k) for k in range(W + 1)]} "
          f"with every instance connected in {balanced:.1f} s")
    # Every send of the run ends sent, once.
    deadline = time.time() + 120
    pending = list(sent_ids)
    while pending and time.time() < deadline:
        pending = [(i, tok, m) for i, tok, m in pending
                   if call("GET", f"{API}/v1/instances/{i}/messages/{m}", None, tok)["status"] != "sent"]
        if pending:
            time.sleep(2)
    inbox = call("GET", f"{NETSIM}/control/phones/{RECIPIENT}/inbox", None, None)["messages"]
    texts = [m.get("text") for m in inbox if (m.get("text") or "").startswith(f"rb {RUN} ")]
    print(f"sends queued around the join: {len(sent_ids)}; not sent after 120 s: {len(pending)}; "
          f"received {len(texts)}, duplicates {len(texts) - len(set(texts))}")


try:
    main()
finally:
    WORKERS.stop_all()
