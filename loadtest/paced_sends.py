"""Paced sends per worker: pairs N netsim instances, queues M sends each, lets the worker
send them at each instance's own pace, and measures from netsim's side (when each
message reached the network):

- sustained sends per second once every instance is past its grace;
- the pacing error: each gap between two sends of one instance minus the gap the pacer
  chose (jitter is 0 here, so the chosen gap is the instance's min_interval_ms);
- the worker's lease losses and revivals (its metrics).

With REPLY_EVERY_S set, the recipient writes back to every instance that often while
they send (a conversation, which the ban-risk evaluation treats as such), through
netsim's bulk route. Sends are queued through loadtest/src/pipeline_feed.rs (FEED_BIN)
when the script built it, which takes a million texts in minutes.

Stdlib only; run by loadtest/paced-sends.sh against a running local cluster.
"""

import concurrent.futures as cf
import os
import json
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import ltlib
from ltlib import call

API = os.environ.get("API", "http://127.0.0.1:8787")
NETSIM = os.environ.get("NETSIM", "http://127.0.0.1:8790")
METRICS = os.environ.get("METRICS", "http://127.0.0.1:9464/metrics")
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
N = int(os.environ.get("INSTANCES", "1000"))
M = int(os.environ.get("SENDS", "15"))
INTERVAL_MS = int(os.environ.get("MIN_INTERVAL_MS", "1000"))
PER_MINUTE = int(os.environ.get("MAX_PER_MINUTE", "60"))
UNSAFE = INTERVAL_MS < 1000 or PER_MINUTE > 60
RECIPIENT = "5511900000000"
REPLY_EVERY_S = float(os.environ.get("REPLY_EVERY_S", "0"))


def backends():
    return ltlib.counters(os.environ["PACELINE_DATABASE_URL"], os.environ["PACELINE_REDIS_URL"],
                          os.environ.get("PL_NATS_MONITOR_PORT", "28222"),
                          os.path.join(os.environ.get("PL_PG_BIN", "/usr/bin"), "psql"))


def main():
    call("POST", f"{NETSIM}/control/phones", {"number": RECIPIENT})
    body = {"min_interval_ms": INTERVAL_MS, "max_per_minute": PER_MINUTE}
    if UNSAFE:
        body["unsafe_pacing"] = True
    instances, connected, took = ltlib.pair_fleet(API, NETSIM, ADMIN, N, "paced", body)
    print(f"    {connected} of {N} instances connected in {took:.1f}s")

    # One moment for all: every instance's send window stays shut while the sends are
    # queued, then opens at the same minute (so pairing and queueing do not stagger the
    # instances). Workers re-read pacing settings every 5 s.
    def window_at(opens):
        return {"start": time.strftime("%H:%M", time.gmtime(opens)),
                "end": time.strftime("%H:%M", time.gmtime(opens + 3 * 3600))}

    def set_window(window):
        def one(x):
            call("PATCH", f"{API}/v1/instances/{x[0]}", {"time_zone": "UTC", "send_window": window}, x[1])

        with cf.ThreadPoolExecutor(32) as pool:
            list(pool.map(one, instances))

    set_window(window_at(time.time() + 4 * 3600))
    time.sleep(6)

    t1 = time.time()
    if os.environ.get("FEED_BIN"):
        feed_file = ltlib.feed_file(instances, "paced-feed")
        env = dict(os.environ, FEED_FILE=feed_file, RECIPIENT=RECIPIENT, HEAD=str(M), DURATION_S="0", API=API,
                   CONCURRENCY="512")
        feed = json.loads(subprocess.run([os.environ["FEED_BIN"]], env=env, stdout=subprocess.PIPE, text=True,
                                         check=True).stdout)
        os.unlink(feed_file)
        if feed["failed"]:
            sys.exit(f"sends not accepted: {feed['failed']}")
    else:
        def queue(x):
            inst, token, _ = x
            for k in range(M):
                call("POST", f"{API}/v1/instances/{inst}/messages",
                     {"to": RECIPIENT, "type": "text", "text": f"{inst} {k}"}, token)

        with cf.ThreadPoolExecutor(32) as pool:
            list(pool.map(queue, instances))
    queued = time.time() - t1
    opens = (int(time.time() + 20 + N / 300) // 60 + 1) * 60
    window = window_at(opens)
    set_window(window)
    print(f"    {N * M} sends queued in {queued:.1f}s ({N * M / queued:.0f}/s); every send window opens at "
          f"{window['start']} UTC, {opens - time.time():.0f}s from now")
    replies = {"sent": 0}
    done = threading.Event()

    def reply():
        # The recipient writes back to every instance every REPLY_EVERY_S while they send.
        time.sleep(max(0, opens - time.time()))
        numbers = [x[2] for x in instances]
        while not done.wait(REPLY_EVERY_S):
            for i in range(0, len(numbers), 1000):
                batch = [{"from": RECIPIENT, "to": n, "text": "ok"} for n in numbers[i:i + 1000]]
                got = call("POST", f"{NETSIM}/control/messages", {"messages": batch})
                replies["sent"] += len(batch) - got["refused"]

    replier = threading.Thread(target=reply)
    if REPLY_EVERY_S > 0:
        replier.start()
    # CPU per process while every instance sends (200% = both cores).
    cpu = {}

    load = []

    def sample():
        time.sleep(max(0, opens + 10 - time.time()))
        load.append(backends())
        cpu.update(ltlib.cpu_by_process(10))
        load.append(backends())

    sampler = threading.Thread(target=sample)
    sampler.start()

    want = connected * M
    deadline = time.time() + max(600, M * INTERVAL_MS / 1000 * 4 + 120)
    inbox = ltlib.Inbox(NETSIM, RECIPIENT)
    while time.time() < deadline:
        # Only whether the last has arrived: the whole inbox is read once, at the end.
        tail = call("GET", f"{NETSIM}/control/phones/{RECIPIENT}/inbox?offset={want - 1}&limit=1")
        if tail["messages"]:
            break
        time.sleep(5)
    done.set()
    if replier.is_alive():
        replier.join()
    inbox.read()
    by_sender = {}
    for sender, t in inbox.received:
        by_sender.setdefault(sender, []).append(t)
    msgs = inbox.received
    gaps, firsts, lasts, long_gaps = [], [], [], []
    min_t = min(t for _, t in msgs) if msgs else 0
    for ts in by_sender.values():
        ts.sort()
        firsts.append(ts[0])
        lasts.append(ts[-1])
        gaps += [(b - a) * 1000 - INTERVAL_MS for a, b in zip(ts, ts[1:])]
        for k, (a, b) in enumerate(zip(ts, ts[1:])):
            if (b - a) * 1000 - INTERVAL_MS > 5000:
                long_gaps.append((k, a - min_t, (b - a)))
    # Sustained: from when every instance has sent its first (all past the grace) to the
    # moment the first instance finished, counting what the network received meanwhile;
    # and the busiest seconds over the whole run.
    start, end = max(firsts), min(lasts)
    all_ts = sorted(t for ts in by_sender.values() for t in ts)
    window = [t for t in all_ts if start <= t <= end]
    rate = len(window) / (end - start) if end > start else float("nan")
    buckets = {}
    for t in all_ts:
        buckets[int(t)] = buckets.get(int(t), 0) + 1
    per_second = sorted(buckets.values())
    # Whole minutes from the first send (a run of 10 minutes or more, as #38 asks, has
    # a busiest and a median minute worth reading; shorter runs print theirs too).
    per_minute = {}
    for t in all_ts:
        per_minute[int((t - all_ts[0]) // 60)] = per_minute.get(int((t - all_ts[0]) // 60), 0) + 1
    whole = sorted(n for k, n in per_minute.items() if all_ts[0] + (k + 1) * 60 <= all_ts[-1])
    metrics = urllib.request.urlopen(METRICS, timeout=10).read().decode()
    lost = ltlib.metric_sum(metrics, "paceline_worker_lease_lost_total")
    revived = ltlib.metric_sum(metrics, "paceline_worker_lease_revived_total")
    print(f"    {len(msgs)} of {want} sends reached the network; duplicates {inbox.duplicates}")
    if REPLY_EVERY_S > 0:
        print(f"    the recipient wrote back {replies['sent']} times (to each instance every {REPLY_EVERY_S:g} s)")
    print()
    print(f"sustained sends/s (one worker, all {connected} instances sending): {rate:.0f}")
    print(f"  (the floor allows {connected * 1000 / INTERVAL_MS:.0f}/s; over the whole run "
          f"{len(all_ts) / (all_ts[-1] - all_ts[0]):.0f}/s, busiest second {per_second[-1]}, "
          f"median second {per_second[len(per_second) // 2]})")
    if whole:
        print(f"  whole minutes: {len(whole)}; busiest {whole[-1] / 60:.0f} sends/s, "
              f"median {whole[len(whole) // 2] / 60:.0f} sends/s")
    print(f"pacing error (real gap - chosen gap {INTERVAL_MS} ms): p50 {ltlib.pct(gaps, 50):.0f} ms, "
          f"p99 {ltlib.pct(gaps, 99):.0f} ms, max {max(gaps) if gaps else float('nan'):.0f} ms, mean "
          f"{statistics.mean(gaps) if gaps else float('nan'):.0f} ms over {len(gaps)} gaps")
    retried = ltlib.metric_sum(metrics, 'paceline_queue_sends_total{result="retried"}')
    print(f"leases lost: {lost:.0f}; leases revived: {revived:.0f}; sends retried: {retried:.0f}")
    # Where a gap's error comes from, by the worker's histograms (bucket bounds, in ms):
    # the send starting after the pacer's moment, and the network taking the send.
    for label, name in (("send started late by", "paceline_queue_send_lateness_seconds"),
                        ("network took the send in", "paceline_queue_send_latency_seconds")):
        qs = [ltlib.bucket_quantile(metrics, name, q) * 1000 for q in (0.5, 0.99, 0.999)]
        print(f"{label}: p50 <= {qs[0]:.0f} ms, p99 <= {qs[1]:.0f} ms, p99.9 <= {qs[2]:.0f} ms (histogram buckets)")
    if long_gaps:
        print(f"gaps over 5 s longer than chosen: {len(long_gaps)}; after send #: "
              f"{sorted(set(k for k, _, _ in long_gaps))[:10]}; starting at "
              f"{min(a for _, a, _ in long_gaps):.1f}-{max(a for _, a, _ in long_gaps):.1f} s into the run")
    sampler.join()
    if len(load) == 2:
        a, b = load
        sent = sum(1 for t in all_ts if a[0] <= t <= b[0])
        print(f"backends per send over the same {b[0] - a[0]:.0f} s ({sent} sends, with their events and "
              f"the worker's and dispatcher's own load):")
        for i, name in enumerate(ltlib.COUNTER_NAMES, start=1):
            if sent and a[i] is not None and b[i] is not None:
                print(f"    {name:<22} {(b[i] - a[i]) / sent:8.2f} per send")
    print("CPU per process while every instance sends (200% = both cores):")
    for name, c in sorted(cpu.items(), key=lambda kv: -kv[1]):
        if c >= 1:
            print(f"    cpu {name:<16} {c:5.0f}%")
    if len(msgs) < want:
        sys.exit(f"only {len(msgs)} of {want} sends arrived")


if __name__ == "__main__":
    main()
