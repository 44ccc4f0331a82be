"""What the Python load scripts share: one JSON call to the API or netsim, retried on
409 and 503, pairing, and the worker processes they start (stdlib only)."""

import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request


def call(method, url, body=None, token=None, expect=(200, 201, 202, 204)):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("content-type", "application/json")
    if token:
        req.add_header("authorization", f"Bearer {token}")
    for attempt in range(5):
        try:
            with urllib.request.urlopen(req, timeout=60) as res:
                raw = res.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            if e.code in expect:
                return None
            if e.code in (409, 503) and attempt < 4:
                time.sleep(0.5)
                continue
            raise RuntimeError(f"{method} {url}: {e.code} {e.read()[:200]!r}") from None
    raise RuntimeError(f"{method} {url}: gave up")


def pair(api, netsim, admin, number, body, tries=600):
    """Registers `number` on netsim (unless it is), creates the instance (`body`), connects it and has the
    phone scan its QR. Returns (instance id, instance token)."""
    call("POST", f"{netsim}/control/phones", {"number": number}, expect=(201, 409))  # 409: registered already
    created = call("POST", f"{api}/v1/instances", body, admin)
    inst, token = created["instance"]["id"], created["token"]
    call("POST", f"{api}/v1/instances/{inst}/connect", {}, token)
    for _ in range(tries):
        try:
            qr = call("GET", f"{api}/v1/instances/{inst}/qr", None, token)
            if qr and qr.get("code"):
                call("POST", f"{netsim}/control/scan", {"code": qr["code"], "number": number})
                return inst, token
        except RuntimeError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"instance {body.get('name')} never showed a QR")


def pair_fleet(api, netsim, admin, n, prefix, body=None, threads=32, timeout_s=600):
    """Pairs n instances (named `prefix-<run>-<i>`, `body`'s fields added, each with a
    simulated phone of its own) and waits until all are connected or timeout_s passes.
    Returns ([(instance id, token, number)], how many connected, seconds taken)."""
    import concurrent.futures as cf

    run, t0 = int(time.time()), time.time()

    def one(i):
        number = f"55119{run % 100000:05d}{i:04d}"
        inst, token = pair(api, netsim, admin, number, dict(body or {}, name=f"{prefix}-{run}-{i}"))
        return inst, token, number

    def state(x):
        return call("GET", f"{api}/v1/instances/{x[0]}", None, admin)["state"]

    with cf.ThreadPoolExecutor(threads) as pool:
        fleet = list(pool.map(one, range(n)))
        states = []
        while time.time() < t0 + timeout_s:
            states = list(pool.map(state, fleet))
            if all(s == "connected" for s in states):
                break
            time.sleep(1)
    return fleet, sum(s == "connected" for s in states), time.time() - t0


def seconds(rfc3339):
    """Unix seconds of an RFC 3339 UTC time with up to nanoseconds."""
    import calendar

    whole, _, frac = rfc3339.rstrip("Z").partition(".")
    t = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
    return t + (float("0." + frac) if frac else 0.0)


def bucket_quantile(text, name, q):
    """The upper bound of the Prometheus histogram bucket holding quantile q (seconds)."""
    buckets = []
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    buckets.sort()
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    for le, count in buckets:
        if count >= q * buckets[-1][1]:
            return le
    return float("inf")


def cpu_by_process(seconds_, labels=None):
    """CPU per process name over the next seconds_ (top's second frame; 200% = two cores);
    `labels` ({pid: name}) names processes that share a command name (paceline's roles)."""
    out = subprocess.run(["top", "-b", "-d", str(seconds_), "-n", "2", "-w", "200"],
                         capture_output=True, text=True).stdout
    cpu = {}
    for line in out.split("\ntop -")[-1].splitlines():
        f = line.split()
        if len(f) >= 12 and f[0].isdigit():
            name = (labels or {}).get(int(f[0]), f[11])
            cpu[name] = cpu.get(name, 0.0) + float(f[8])
    return cpu


def proc_status(pid):
    """A process's resident memory and its peak ({"VmRSS", "VmHWM"}, MiB), from /proc."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024
    return out


def connected(api, admin):
    """How many instances are connected, from the API (paged)."""
    n, cursor = 0, None
    while True:
        url = f"{api}/v1/instances?state=connected&limit=200" + (f"&cursor={cursor}" if cursor else "")
        page = call("GET", url, None, admin)
        n += len(page["instances"])
        cursor = page.get("next_cursor")
        if not cursor:
            return n


class Workers:
    """`paceline worker` processes (or another role's) started by a load script, process k
    serving its metrics on port 9480 + k and logging to a file of its own (removed by
    `stop_all`)."""

    def __init__(self, log_level="warn"):
        self.log_level = log_level
        self.procs = []  # (process, log path)
        self.old_logs = []  # of processes restarted

    def start(self, k, role="worker"):
        env = dict(os.environ)
        env.update({"PACELINE_METRICS_ADDR": f"127.0.0.1:{9480 + k}", "PACELINE_LOG__LEVEL": self.log_level})
        log = tempfile.NamedTemporaryFile(prefix=f"paceline-{role}{k}-", suffix=".log", delete=False)
        p = subprocess.Popen([env["PACELINE_BIN"], role], env=env, stdout=subprocess.DEVNULL, stderr=log)
        if k < len(self.procs):
            self.old_logs.append(self.procs[k][1])
            self.procs[k] = (p, log.name)
        else:
            self.procs.append((p, log.name))
        return p

    def restart(self, k, role="worker"):
        """Starts process k again (its metrics port and a new log) once the last has exited."""
        self.procs[k][0].wait()
        return self.start(k, role)

    def process(self, k):
        return self.procs[k][0]

    def log(self, k):
        return self.procs[k][1]

    @staticmethod
    def metrics(k):
        """Worker k's metrics (Prometheus text); raises OSError when it does not answer."""
        return urllib.request.urlopen(f"http://127.0.0.1:{9480 + k}/metrics", timeout=5).read().decode()

    @staticmethod
    def held(k):
        """The leases worker k holds, from its metrics (0 when it does not answer)."""
        try:
            text = Workers.metrics(k)
        except OSError:
            return 0
        for line in text.splitlines():
            if line.startswith("paceline_worker_leases_held "):
                return int(float(line.rsplit(" ", 1)[1]))
        return 0

    def stop_all(self):
        for p, _ in self.procs:
            if p.poll() is None:
                p.terminate()
        for p, log in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
            os.unlink(log)
        for log in self.old_logs:
            os.unlink(log)


class Inbox:
    """A netsim phone's inbox, read a page at a time from where the last read stopped
    (so a long run copies only what is new)."""

    def __init__(self, netsim, number, page=50000):
        self.url, self.page = f"{netsim}/control/phones/{number}/inbox", page
        self.received = []  # (sender, unix seconds)
        self.duplicates = 0

    def read(self):
        while True:
            got = call("GET", f"{self.url}?offset={len(self.received)}&limit={self.page}")
            self.received += [(m["from"], seconds(m["received_at"])) for m in got["messages"]]
            self.duplicates = got.get("duplicates", 0)
            if len(got["messages"]) < self.page:
                return len(self.received)


def feed_file(fleet, name):
    """Writes the fleet's `inst token` lines for loadtest/src/pipeline_feed.rs (FEED_FILE)."""
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"{name}-{os.getpid()}.txt")
    with open(path, "w") as f:
        f.writelines(f"{x[0]} {x[1]}\n" for x in fleet)
    return path


def run_roles(run):
    """Runs run(procs, worker, dispatcher, roles) with a worker (0) and a dispatcher (1)
    as processes of their own beside `paceline dev` (the API, console and netsim), so
    CPU and memory are told per role (`roles`: {pid: role name}); stops them after."""
    procs = Workers()
    try:
        worker, dispatcher = procs.start(0), procs.start(1, "dispatcher")
        with open(os.path.join(os.environ.get("PL_DEV_DIR", ".paceline"), "paceline.pid")) as f:
            dev = int(f.read().split()[0])
        roles = {worker.pid: "worker", dispatcher.pid: "dispatcher", dev: "api+netsim"}
        run(procs, worker, dispatcher, roles)
    finally:
        procs.stop_all()


def sink_stats(sink):
    """The webhook sink's figures since its last reset (loadtest/src/webhook_sink.rs)."""
    return json.loads(urllib.request.urlopen(f"{sink}/stats", timeout=30).read())


def redis_info(url, section):
    """Redis's INFO `section` as a dict, over a plain socket (RESP inline command)."""
    import socket

    host_port = url.split("://", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(f"INFO {section}\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            data += chunk
            if not chunk or (data.startswith(b"$") and len(data) >= int(data[1:data.index(b"\r\n")]) + 4):
                break
    out = {}
    for line in data.decode().splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k] = v
    return out


def sql(db_url, query, schema=None, psql="psql"):
    """The rows `query` answers (in `schema` when given), as lists of strings."""
    import subprocess

    args = [psql, "-XAtq", "-F", "\t", db_url]
    if schema:
        args += ["-c", f"SET search_path TO {schema}"]
    out = subprocess.run(args + ["-c", query], capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def counters(db_url, redis_url, nats_monitor_port, psql="psql"):
    """What the backends did so far: (time, Postgres commits, rows written, rows read,
    Redis commands, NATS messages in or None without NATS's monitor). Differences of two
    readings are a window's load."""
    import json

    pg = sql(db_url, "SELECT sum(xact_commit), sum(tup_inserted + tup_updated + tup_deleted), sum(tup_fetched) "
             "FROM pg_stat_database", psql=psql)[0]
    redis = int(redis_info(redis_url, "stats")["total_commands_processed"])
    try:
        url = f"http://127.0.0.1:{nats_monitor_port}/varz"
        nats = json.loads(urllib.request.urlopen(url, timeout=5).read())["in_msgs"]
    except (OSError, ValueError, KeyError):
        nats = None
    return time.time(), int(pg[0]), int(pg[1]), int(pg[2]), redis, nats


COUNTER_NAMES = ["Postgres commits", "Postgres rows written", "Postgres rows read", "Redis commands",
                 "NATS messages in"]


def delete_stream(nats_url, name, timeout=5.0):
    """Deletes the JetStream stream `name` (a run's events), speaking NATS's text protocol
    over a socket (stdlib only): each run has its own subject prefix, and streams left
    behind reserve their max bytes until JetStream refuses new ones."""
    import socket

    host, port = nats_url.split("://", 1)[-1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.recv(4096)  # INFO
        s.sendall(
            b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.lt 1\r\n'
            + f"PUB $JS.API.STREAM.DELETE.{name} _INBOX.lt 0\r\n\r\nPING\r\n".encode()
        )
        got = b""
        deadline = time.time() + timeout
        while b"MSG _INBOX.lt" not in got and time.time() < deadline:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        return b'"success":true' in got


def pct(xs, p):
    """The p-th percentile of xs (nearest rank below), NaN when empty."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def metric_sum(text, name, default=0.0):
    """The sum of a Prometheus text's samples whose line starts with name (a family, or
    one series with its labels); default when none does."""
    total = None
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            try:
                total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return default if total is None else total


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 4 and sys.argv[1] == "delete-stream":
        print("stream deleted" if delete_stream(sys.argv[2], sys.argv[3]) else "stream not deleted")
