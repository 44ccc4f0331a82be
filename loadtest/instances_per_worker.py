"""Instances per worker, measured on one `paceline worker` process (see
instances-per-worker.sh): RSS per instance, idle CPU, idle Redis commands per second, and
the time for a fresh worker to claim and connect every instance. Stdlib only.
"""

import concurrent.futures as cf
import os
import subprocess
import sys
import time
import urllib.request

import ltlib

API = "http://127.0.0.1:8787"
NETSIM = "http://127.0.0.1:8790"
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
N = int(os.environ.get("INSTANCES", "1000"))
METRICS = os.environ.get("WORKER_METRICS", "127.0.0.1:9470")
REDIS = os.environ["PACELINE_REDIS_URL"]
RUN = str(int(time.time()))
TICK = os.sysconf("SC_CLK_TCK")


def start_worker():
    env = dict(os.environ)
    env.update({
        "PACELINE_METRICS_ADDR": METRICS,
        "PACELINE_WORKER__MAX_INSTANCES": "20000",
        "PACELINE_LOG__LEVEL": "warn",
    })
    return subprocess.Popen([env["PACELINE_BIN"], "worker"], env=env, stdout=subprocess.DEVNULL)


def metric(name):
    try:
        text = urllib.request.urlopen(f"http://{METRICS}/metrics", timeout=5).read().decode()
    except OSError:
        return 0.0
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name + " ") or l.startswith(name + "{"))


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def redis_commands():
    """(commands the server ran, requests it received): the renewal script's own GET and
    PEXPIRE calls count in the first, not in the second."""
    total = int(ltlib.redis_info(REDIS, "stats")["total_commands_processed"])
    calls = {k[len("cmdstat_"):]: int(v.split(",")[0].split("=")[1]) for k, v in ltlib.redis_info(REDIS, "commandstats").items()}
    inside = calls.get("get", 0) + calls.get("pexpire", 0)
    return total, total - inside


def idle(pid, seconds=30):
    """CPU share of one core, Redis commands/s and Redis requests/s over `seconds`."""
    c0, (r0, q0), t0 = cpu_seconds(pid), redis_commands(), time.time()
    time.sleep(seconds)
    c1, (r1, q1), t1 = cpu_seconds(pid), redis_commands(), time.time()
    # The two INFO calls of each sample are ours.
    return (c1 - c0) / (t1 - t0), (r1 - r0 - 2) / (t1 - t0), (q1 - q0 - 2) / (t1 - t0)


def pair(i):
    inst, _ = ltlib.pair(API, NETSIM, ADMIN, f"551{int(RUN) % 1000:03d}{i:07d}", {"name": f"ipw-{RUN}-{i}"}, 1500)
    return inst


def connected():
    return ltlib.connected(API, ADMIN)


def wait_all(within):
    t0 = time.time()
    while time.time() - t0 < within:
        if metric("paceline_worker_leases_held") >= N and connected() >= N:
            return time.time() - t0
        time.sleep(1)
    return None


WORKERS = []


def main():
    worker = start_worker()
    WORKERS.append(worker)
    for _ in range(120):
        if metric("paceline_worker_leases_held") == 0 and rss_kb(worker.pid):
            try:
                urllib.request.urlopen(f"http://{METRICS}/readyz", timeout=2)
                break
            except OSError:
                pass
        time.sleep(0.5)
    time.sleep(5)
    rss0 = rss_kb(worker.pid)
    cpu0, redis0, req0 = idle(worker.pid, 15)
    print(f"worker with no instance: RSS {rss0 / 1024:.1f} MB, idle CPU {cpu0 * 100:.1f}% of a core, "
          f"Redis {req0:.1f} requests/s ({redis0:.1f} commands/s)")

    t0 = time.time()
    with cf.ThreadPoolExecutor(32) as pool:
        done = 0
        for _ in pool.map(pair, range(N)):
            done += 1
            if done % 500 == 0:
                print(f"  paired {done}/{N} ({time.time() - t0:.0f} s)", flush=True)
    took = wait_all(600)
    if took is None:
        sys.exit(f"not every instance connected: {connected()}/{N}")
    print(f"paired and connected {N} instances in {time.time() - t0:.0f} s")
    time.sleep(20)
    rss = rss_kb(worker.pid)
    cpu, redis, req = idle(worker.pid, 30)
    per = (rss - rss0) / N
    print(f"worker with {N} instances: RSS {rss / 1024:.1f} MB ({per:.1f} KB per instance), "
          f"idle CPU {cpu * 100:.1f}% of a core, Redis {req:.1f} requests/s "
          f"({redis:.1f} commands/s counting the renewal script's GET and PEXPIRE per lease)")
    hold = int(os.environ.get("HOLD", "0"))
    if hold:
        print(f"holding {hold} s: worker pid {worker.pid}", flush=True)
        time.sleep(hold)

    # A fresh worker claims and connects all N (the first one stops with SIGTERM and
    # releases its leases, as in a rollout).
    t_stop = time.time()
    worker.terminate()
    worker.wait()
    print(f"the first worker stopped on SIGTERM in {time.time() - t_stop:.1f} s "
          f"(its {N} sessions closed and written disconnected, its leases released)")
    time.sleep(1)
    t0 = time.time()
    worker = start_worker()
    WORKERS.append(worker)
    took = wait_all(900)
    worker.kill()
    worker.wait()
    if took is None:
        sys.exit(f"a fresh worker did not take every instance: {connected()}/{N}")
    print(f"a fresh worker claimed and connected all {N} in {time.time() - t0:.1f} s (from its start)")


try:
    main()
finally:
    for w in WORKERS:
        if w.poll() is None:
            w.kill()
