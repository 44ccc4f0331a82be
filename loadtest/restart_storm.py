"""Restart storm (see restart-storm.sh): pairs N netsim instances on W workers, queues a
text on some of them while every worker is down at once (SIGKILL: no handoff), starts W
fresh workers and measures, each second, what the storm costs: sessions connected,
Postgres commits, Redis commands and CPU per process. Then waits for the queued texts to
reach the network after their post-connection grace. Stdlib only.
"""

import concurrent.futures as cf
import os
import sys
import time

import ltlib

API = "http://127.0.0.1:8787"
NETSIM = "http://127.0.0.1:8790"
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
N = int(os.environ.get("INSTANCES", "10000"))
W = int(os.environ.get("WORKERS", "2"))
SENDS = min(N, int(os.environ.get("SENDS", "1000")))
RATE = int(os.environ.get("PACELINE_WORKER__CONNECTS_PER_SECOND", "250"))
DB = os.environ["PACELINE_DATABASE_URL"]
SCHEMA = os.environ["PACELINE_NAMESPACE__DATABASE_SCHEMA"]
PSQL = os.path.join(os.environ.get("PL_PG_BIN", "/usr/bin"), "psql")
RECIPIENT = "5511900000001"
RUN = str(int(time.time()))
TICK = os.sysconf("SC_CLK_TCK")
NATS_MONITOR = os.environ.get("PL_NATS_MONITOR_PORT", "28222")


def sql(query):
    """Rows of `query` in the run's schema, as lists of strings."""
    return ltlib.sql(DB, query, SCHEMA, PSQL)


def pair(i):
    number = f"552{int(RUN) % 1000:03d}{i:07d}"
    return ltlib.pair(API, NETSIM, ADMIN, number, {"name": f"storm-{RUN}-{i}"}, 1500)


def cpu_by_process(workers):
    """Each process's (kind, CPU seconds so far); the kind names what it is."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            raw = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        if int(pid) in workers:
            comm = "paceline worker"
        elif comm == "paceline":
            comm = "paceline (api, netsim, dispatcher)"
        elif comm.startswith("kworker"):
            comm = "kernel workers"
        out[int(pid)] = (comm, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def cpu_share(a, b, dt):
    """CPU per kind between two `cpu_by_process` readings, in % of one core."""
    share = {}
    for pid, (comm, secs) in b.items():
        share[comm] = share.get(comm, 0.0) + (secs - a.get(pid, (comm, secs))[1]) / dt * 100
    return share


def sample(workers, since):
    """(time, instances connected again since `since`, Postgres commits, Redis commands,
    CPU by process). A killed worker leaves its rows `connected`: what counts is a
    connect after the restart."""
    row = sql("SELECT (SELECT count(*) FROM instances WHERE state = 'connected' "
              f"AND state_changed_at > to_timestamp({since})), "
              "(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())")[0]
    redis = int(ltlib.redis_info(os.environ["PACELINE_REDIS_URL"], "stats")["total_commands_processed"])
    return time.time(), int(row[0]), int(row[1]), redis, cpu_by_process(workers)


def counters():
    return ltlib.counters(DB, os.environ["PACELINE_REDIS_URL"], NATS_MONITOR, PSQL)


def idle_load(seconds=130):
    """What N idle instances cost each backend, per second and per 1,000 instances, over a
    window of two ban-risk evaluation rounds (risk.interval_ms, a minute; a round of
    evaluations is bursty, so one window of a minute over- or undercounts it)."""
    a = counters()
    time.sleep(seconds)
    b = counters()
    dt = b[0] - a[0]
    k = N / 1000
    print(f"idle load of {N} connected instances over {dt:.0f} s (per second, and per 1,000 instances):")
    for i, name in enumerate(ltlib.COUNTER_NAMES, start=1):
        if a[i] is None or b[i] is None:
            print(f"    {name:<22} n/a (no NATS monitor)")
            continue
        rate = (b[i] - a[i]) / dt
        print(f"    {name:<22} {rate:9.1f}/s  {rate / k:8.1f}/s per 1,000")


def main():
    ws = ltlib.Workers()
    for k in range(W):
        ws.start(k)
    try:
        run(ws)
    finally:
        ws.stop_all()


def run(ws):
    ltlib.call("POST", f"{NETSIM}/control/phones", {"number": RECIPIENT})
    t0 = time.time()
    with cf.ThreadPoolExecutor(32) as pool:
        instances = []
        for x in pool.map(pair, range(N)):
            instances.append(x)
            if len(instances) % 1000 == 0:
                print(f"  paired {len(instances)}/{N} ({time.time() - t0:.0f} s)", flush=True)
    while int(sql("SELECT count(*) FROM instances WHERE state = 'connected'")[0][0]) < N:
        if time.time() - t0 > 1800:
            sys.exit("not every instance connected")
        time.sleep(2)
    print(f"paired and connected {N} instances on {W} workers in {time.time() - t0:.0f} s")
    time.sleep(10)
    idle_load()

    # Every worker at once, with no handoff: their leases lapse after the TTL.
    for k in range(W):
        ws.process(k).kill()
    for k in range(W):
        ws.process(k).wait()
    down = time.time()
    print(f"killed all {W} workers (SIGKILL)")

    def queue(x):
        inst, token = x
        ltlib.call("POST", f"{API}/v1/instances/{inst}/messages",
                   {"to": RECIPIENT, "type": "text", "text": f"after the storm {inst}"}, token)

    with cf.ThreadPoolExecutor(16) as pool:
        list(pool.map(queue, instances[:SENDS]))
    print(f"queued {SENDS} texts while the workers were down ({time.time() - down:.1f} s)")

    started = time.time()
    for k in range(W):
        ws.start(W + k)
    pids = {ws.process(W + k).pid for k in range(W)}
    samples = [sample(pids, started)]
    failed = 0.0
    while samples[-1][1] < N:
        if time.time() - started > 600:
            sys.exit(f"only {samples[-1][1]} of {N} connected 600 s after the restart")
        time.sleep(max(0.0, samples[-1][0] + 1 - time.time()))
        samples.append(sample(pids, started))
    all_back = samples[-1][0] - started
    shed = 0.0
    for k in range(W):
        text = ltlib.Workers.metrics(W + k)
        failed += ltlib.metric_sum(text, 'paceline_worker_session_events_total{kind="open_failed"}')
        shed += ltlib.metric_sum(text, "paceline_worker_instances_shed_total")

    # Each instance's connect, from its row: when after the restart it came back.
    rows = sql("SELECT extract(epoch FROM state_changed_at) FROM instances WHERE state = 'connected' "
               f"AND state_changed_at > to_timestamp({started})")
    back = sorted(float(r[0]) - started for r in rows)
    per_second = {}
    for b in back:
        per_second[int(b)] = per_second.get(int(b), 0) + 1
    first = back[0]
    print()
    print(f"all {N} sessions back {all_back:.1f} s after the workers started "
          f"(the first came back at {first:.1f} s: the dead workers' leases lapse after the lease TTL)")
    print(f"  per instance, from the workers' start: p50 {ltlib.pct(back, 50):.1f} s, "
          f"p99 {ltlib.pct(back, 99):.1f} s, max {back[-1]:.1f} s")
    print(f"  connects per second: peak {max(per_second.values())}, median "
          f"{sorted(per_second.values())[len(per_second) // 2]} (paced at {RATE}/s per worker, {W} workers)")
    print(f"  failed connects: {failed:.0f}; sessions handed over between the new workers (over their share "
          f"while the dead workers still counted): {shed:.0f}")
    peaks = {}
    for a, b in zip(samples, samples[1:]):
        dt = b[0] - a[0]
        for name, pct in cpu_share(a[4], b[4], dt).items():
            peaks[name] = max(peaks.get(name, 0.0), pct)
        peaks["postgres commits/s"] = max(peaks.get("postgres commits/s", 0), (b[2] - a[2]) / dt)
        peaks["redis commands/s"] = max(peaks.get("redis commands/s", 0), (b[3] - a[3]) / dt)
    print(f"  peak Postgres commits/s {peaks.pop('postgres commits/s', 0):.0f}, "
          f"peak Redis commands/s {peaks.pop('redis commands/s', 0):.0f}")
    print("  peak CPU per process over one-second samples (200% = both cores):")
    for name, c in sorted(peaks.items(), key=lambda kv: -kv[1]):
        if c >= 5:
            print(f"    cpu {name:<36} {c:5.0f}%")

    # The texts queued meanwhile go after each instance's post-connection grace.
    deadline = time.time() + 180
    inbox = {"messages": []}
    while time.time() < deadline:
        inbox = ltlib.call("GET", f"{NETSIM}/control/phones/{RECIPIENT}/inbox")
        if len(inbox["messages"]) >= SENDS:
            break
        time.sleep(2)
    rows = sql("SELECT extract(epoch FROM m.sent_at - i.state_changed_at), extract(epoch FROM m.sent_at) "
               "FROM messages m JOIN instances i ON i.id = m.instance_id WHERE m.sent_at IS NOT NULL")
    after_connect = sorted(float(r[0]) for r in rows)
    last = max((float(r[1]) for r in rows), default=started) - started
    print(f"queued texts: {len(inbox['messages'])} of {SENDS} reached the network, duplicates "
          f"{inbox.get('duplicates', 0)}; sent {ltlib.pct(after_connect, 0):.1f}-{after_connect[-1] if after_connect else 0:.1f} s "
          f"after their instance connected (grace 15-30 s), the last {last:.0f} s after the restart")
    if len(inbox["messages"]) < SENDS or inbox.get("duplicates", 0) or failed:
        sys.exit("sends lost or duplicated, or connects failed")


if __name__ == "__main__":
    main()
