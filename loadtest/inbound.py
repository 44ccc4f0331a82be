"""Inbound (#38 item 6), run by loadtest/inbound.sh against a running local cluster and
sink: N paired instances on one worker, each with a webhook for `message.received`;
contacts write to them at RATE/s for SECONDS_ through netsim's bulk control route.
Reports per 10 s and in all: taken by netsim, logged (the worker's
paceline_worker_received_total{source="live"}), delivered at the sink, netsim's
unacknowledged backlog and CPU per process; then the drain and that every message is
logged once and delivered. Then a history sync of HISTORY messages to a new instance on
the same worker, with the worker's RSS sampled every 200 ms. Stdlib only."""

import concurrent.futures as cf
import os
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
N = int(os.environ.get("INSTANCES", "100"))
RATE = int(os.environ.get("RATE", "2000"))
SECONDS = int(os.environ.get("SECONDS_", "120"))
HISTORY = int(os.environ.get("HISTORY", "100000"))
CONTACTS = [f"55219700{i:05d}" for i in range(20)]
WINDOW = 10
DB = os.environ["PACELINE_DATABASE_URL"]
SCHEMA = os.environ.get("PACELINE_NAMESPACE__DATABASE_SCHEMA")
PSQL = os.path.join(os.environ.get("PL_PG_BIN", "/usr/bin"), "psql")


def db(query):
    return ltlib.sql(DB, query, SCHEMA, PSQL)


def logged():
    """Messages the worker logged, live and from history (its counter)."""
    try:
        text = ltlib.Workers.metrics(0)
    except OSError:
        return float("nan"), float("nan")
    live = ltlib.metric_sum(text, 'paceline_worker_received_total{source="live"}')
    history = ltlib.metric_sum(text, 'paceline_worker_received_total{source="history"}')
    return live, history


def sink_stats():
    return ltlib.sink_stats(SINK)


def netsim_stats():
    return call("GET", f"{NETSIM}/control/stats")


def main():
    ltlib.run_roles(run)


def run(procs, worker, dispatcher, roles):
    for c in CONTACTS:
        call("POST", f"{NETSIM}/control/phones", {"number": c})
    fleet, connected, took = ltlib.pair_fleet(API, NETSIM, ADMIN, N, "inbound")
    print(f"    {connected} of {N} instances connected in {took:.1f}s")
    if connected < N:
        sys.exit("not every instance connected")

    def hook(i):
        inst, token, _ = fleet[i]
        call("POST", f"{API}/v1/instances/{inst}/webhooks",
             {"url": f"{SINK}/fast/{i}", "events": ["message.received"]}, token)

    with cf.ThreadPoolExecutor(16) as pool:
        list(pool.map(hook, range(N)))
    urllib.request.urlopen(urllib.request.Request(f"{SINK}/reset", method="POST"), timeout=10).read()
    numbers = [number for _, _, number in fleet]

    # The feed: every 100 ms, what the rate owes since the start, in bulk calls of <= 1000.
    taken, refused = [0], [0]
    feeding = threading.Event()
    feeding.set()

    def feed():
        t0, k = time.time(), 0
        while time.time() < t0 + SECONDS:
            due = int((time.time() - t0) * RATE) - k
            while due > 0:
                n = min(due, 1000)
                msgs = [{"from": CONTACTS[(k + j) % len(CONTACTS)], "to": numbers[(k + j) % N],
                         "text": f"inbound {k + j}"} for j in range(n)]
                r = call("POST", f"{NETSIM}/control/messages", {"messages": msgs})
                refused[0] += r["refused"]
                taken[0] += n - r["refused"]
                k, due = k + n, due - n
            time.sleep(0.1)
        feeding.clear()

    windows = []

    def observe():
        live0, _ = logged()
        d0, taken0, t_prev = sink_stats()["count"], taken[0], time.time()
        while feeding.is_set():
            cpu = ltlib.cpu_by_process(WINDOW, roles)
            now, (live, _) = time.time(), logged()
            d, tk = sink_stats()["count"], taken[0]
            windows.append({"taken": (tk - taken0) / (now - t_prev), "logged": (live - live0) / (now - t_prev),
                            "delivered": (d - d0) / (now - t_prev), "unacked": netsim_stats()["unacked"],
                            "cpu": cpu})
            live0, d0, taken0, t_prev = live, d, tk, now

    feeder, observer = threading.Thread(target=feed), threading.Thread(target=observe)
    t_start = time.time()
    feeder.start()
    observer.start()
    feeder.join()
    t_fed = time.time()
    observer.join()
    total = taken[0]
    print(f"    netsim took {total} messages in {t_fed - t_start:.1f}s ({total / (t_fed - t_start):.0f}/s), "
          f"refused {refused[0]}")

    # Drain: every message logged and delivered, or the deadline says how far it got.
    deadline = time.time() + 600
    while time.time() < deadline:
        live, _ = logged()
        if live >= total and sink_stats()["unique"] >= total:
            break
        time.sleep(2)
    drained = time.time() - t_fed
    s = sink_stats()
    rows = db("SELECT count(*), count(DISTINCT (instance_id, chat_jid, wa_message_id)), "
              "percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM created_at - ts)), "
              "percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM created_at - ts)) "
              "FROM log_messages WHERE source = 'live' AND NOT from_me")[0]
    n_log, n_distinct, lag50, lag99 = int(rows[0]), int(rows[1]), float(rows[2] or "nan"), float(rows[3] or "nan")
    events = int(db("SELECT count(*) FROM outbox WHERE type = 'message.received'")[0][0])
    print(f"    drained {drained:.0f}s after the feed stopped; netsim backlog now {netsim_stats()['unacked']} "
          f"unacknowledged, {netsim_stats()['dropped']} dropped")
    print()
    print(f"taken {total}, logged {n_log} ({n_distinct} distinct), message.received events {events}, "
          f"delivered {s['unique']} ({s['duplicates']} twice)")
    print("window  taken/s  logged/s  delivered/s  unacked  CPU api+netsim/worker/dispatcher/postgres")
    for k, w in enumerate(windows, start=1):
        c = w["cpu"]
        print(f"{k * WINDOW:5d}s  {w['taken']:7.0f}  {w['logged']:8.0f}  {w['delivered']:11.0f}  {w['unacked']:7d}  "
              + " / ".join(f"{c.get(n, 0):.0f}%" for n in ("api+netsim", "worker", "dispatcher", "postgres")))
    steady = windows[1:] or windows
    if steady:
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        print(f"after the first window: logged/s median {med([w['logged'] for w in steady]):.0f}, best "
              f"{max(w['logged'] for w in steady):.0f}; delivered/s median {med([w['delivered'] for w in steady]):.0f} "
              f"(goal >= 2000 logged/s a worker)")
        names = sorted({n for w in steady for n in w["cpu"]}, key=lambda n: -sum(w["cpu"].get(n, 0) for w in steady))
        print("CPU per process, mean of the windows after the first (200% = both cores):")
        for name in names:
            mean = sum(w["cpu"].get(name, 0) for w in steady) / len(steady)
            if mean >= 1:
                print(f"    cpu {name:<16} {mean:5.0f}%")
    print(f"network to log: p50 {lag50 * 1000:.0f} ms, p99 {lag99 * 1000:.0f} ms; event to arrival at the sink: "
          f"p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms")
    ok = n_log == total == n_distinct == events and s["unique"] >= total

    # The history sync: a new phone with HISTORY archived messages pairs on the same worker.
    rss0 = ltlib.proc_status(worker.pid)["VmRSS"]
    number = f"55219800{int(time.time()) % 100000:05d}"
    call("POST", f"{NETSIM}/control/phones", {"number": number})
    call("POST", f"{NETSIM}/control/phones/{number}/archive", {"messages": HISTORY})
    _, h0 = logged()
    body = {"name": f"history-{number}"}
    t0 = time.time()
    inst, _ = ltlib.pair(API, NETSIM, ADMIN, number, body)
    peak, done = rss0, 0
    while time.time() < t0 + 1800:
        peak = max(peak, ltlib.proc_status(worker.pid)["VmRSS"])
        _, h = logged()
        done = h - h0
        if done >= HISTORY:
            break
        time.sleep(0.2)
    took = time.time() - t0
    in_log = int(db(f"SELECT count(*) FROM log_messages WHERE instance_id = '{inst}' AND source = 'history'")[0][0])
    print(f"history sync of {HISTORY}: {in_log} logged in {took:.1f}s ({in_log / took:.0f}/s) from pairing; "
          f"worker RSS {rss0:.0f} MiB before, peak {peak:.0f} MiB during (goal < 256 MB), "
          f"VmHWM {ltlib.proc_status(worker.pid)['VmHWM']:.0f} MiB over the whole run")
    ok = ok and in_log == HISTORY
    if not ok:
        sys.exit("taken, logged and delivered differ")


if __name__ == "__main__":
    main()
