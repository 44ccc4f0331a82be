"""Evolution `base64` webhooks against a dispatcher's memory (loadtest/webhook-base64.sh).

Ten tenants each register two Evolution-format webhooks with `webhook_base64` on one URL
that never answers (20 in all); 40 images of IMAGE_MB MiB arrive at them from netsim
phones (four each). Meanwhile another tenant, with an ordinary webhook on an endpoint
that answers at once, gets a text every half second. The dispatcher runs as its own
process (`paceline dispatcher`): its peak resident memory (VmHWM) is read from /proc,
with its body budget's gauge, and the other tenant's delivery latency (event created to
received) is compared before and during the images. Python stdlib only.
"""

import base64
import http.server
import json
import os
import random
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

import ltlib

API = "http://127.0.0.1:8787"
NETSIM = "http://127.0.0.1:8790"
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
BIN = os.environ["PACELINE_BIN"]
TENANTS = int(os.environ.get("TENANTS", "10"))
IMAGES = int(os.environ.get("IMAGES", "40"))
IMAGE_MB = float(os.environ.get("IMAGE_MB", "9.5"))
HOLD_SECS = int(os.environ.get("HOLD_SECS", "60"))
METRICS = "127.0.0.1:9471"
RUN = f"{int(time.time()) % 100000:05d}"
call = ltlib.call


def black_hole():
    """An endpoint that takes connections and requests and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1024)
    held = []

    def accept():
        while True:
            c, _ = s.accept()
            held.append(c)

    threading.Thread(target=accept, daemon=True).start()
    return s.getsockname()[1]


LATENCIES = {"before": [], "during": []}
PHASE = ["before"]


class Recorder(http.server.BaseHTTPRequestHandler):
    """The other tenant's endpoint: 204 at once; records each event's delivery latency."""

    def do_POST(self):  # noqa: N802 - the stdlib's name
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204)
        self.end_headers()
        try:
            ev = json.loads(body)
            created = ev["created_at"].replace("Z", "+00:00")
            from datetime import datetime

            lag = time.time() - datetime.fromisoformat(created).timestamp()
            LATENCIES[PHASE[0]].append(lag)
        except (ValueError, KeyError):
            pass

    def log_message(self, *_):
        pass


def recorder():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


def metric(name):
    try:
        text = urllib.request.urlopen(f"http://{METRICS}/metrics", timeout=5).read().decode()
    except OSError:
        return None
    return ltlib.metric_sum(text, name, default=None)


def main():
    hole = black_hole()
    rec = recorder()
    env = dict(os.environ, PACELINE_METRICS_ADDR=METRICS, PACELINE_LOG__LEVEL="warn")
    log = tempfile.NamedTemporaryFile(prefix="paceline-dsp-", suffix=".log", delete=False)
    dsp = subprocess.Popen([BIN, "dispatcher"], env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        run(hole, rec, dsp)
    finally:
        dsp.terminate()
        try:
            dsp.wait(timeout=30)
        except subprocess.TimeoutExpired:
            dsp.kill()
        os.unlink(log.name)


def run(hole, rec, dsp):
    base = 5511960000000 + int(RUN) * 100
    tenants = []
    for i in range(TENANTS):
        number = str(base + i)
        inst, token = ltlib.pair(API, NETSIM, ADMIN, number, {"name": f"b64-{RUN}-{i}"})
        for _ in range(2):
            body = {"url": f"http://127.0.0.1:{hole}/evolution", "format": "evolution", "base64": True}
            call("POST", f"{API}/v1/instances/{inst}/webhooks", body, token)
        tenants.append((inst, number))
    other_number = str(base + 50)
    other, other_token = ltlib.pair(API, NETSIM, ADMIN, other_number, {"name": f"b64-{RUN}-other"})
    hook = {"url": f"http://127.0.0.1:{rec}/hook", "events": ["message.received"]}
    call("POST", f"{API}/v1/instances/{other}/webhooks", hook, other_token)
    senders = [str(base + 60 + k) for k in range(IMAGES)]
    friend = str(base + 59)
    for n in senders + [friend]:
        call("POST", f"{NETSIM}/control/phones", {"number": n})
    print(f"    {TENANTS} tenants with 2 base64 webhooks each on one URL that never answers; another tenant's webhook answers at once")

    stop = threading.Event()

    def chatter():
        k = 0
        while not stop.is_set():
            call("POST", f"{NETSIM}/control/phones/{friend}/messages", {"to": other_number, "text": f"ping {k}"})
            k += 1
            time.sleep(0.5)

    t = threading.Thread(target=chatter, daemon=True)
    t.start()
    time.sleep(10)
    idle = ltlib.proc_status(dsp.pid)
    print(f"    dispatcher before the images: RSS {idle['VmRSS']:.0f} MiB (peak {idle['VmHWM']:.0f} MiB)")

    PHASE[0] = "during"
    size = int(IMAGE_MB * 1024 * 1024)
    payload = bytes([0xFF, 0xD8, 0xFF, 0xE0]) + random.randbytes(size - 4)
    data = base64.b64encode(payload).decode()
    started = time.time()
    for k, n in enumerate(senders):
        to = tenants[k % TENANTS][1]
        body = {"to": to, "type": "image", "media": {"data": data, "mime_type": "image/jpeg", "filename": f"i{k}.jpg"}}
        call("POST", f"{NETSIM}/control/phones/{n}/messages", body)
    print(f"    {IMAGES} images of {IMAGE_MB} MiB sent in {time.time() - started:.1f} s; holding {HOLD_SECS} s")
    peak_budget = 0.0
    samples = []
    end = time.time() + HOLD_SECS
    while time.time() < end:
        st = ltlib.proc_status(dsp.pid)
        samples.append(st["VmRSS"])
        b = metric("paceline_webhook_body_bytes_in_flight")
        if b is not None:
            peak_budget = max(peak_budget, b)
        time.sleep(0.5)
    stop.set()
    t.join(timeout=5)
    st = ltlib.proc_status(dsp.pid)
    attempts = metric('paceline_webhook_attempts_total{result="no_answer"}') or 0
    deferred = metric("paceline_webhook_deferred_total") or 0
    received = call("GET", f"{API}/v1/instances/{tenants[0][0]}/chats?limit=50", None, ADMIN)
    b, d = LATENCIES["before"], LATENCIES["during"]
    print(f"    dispatcher peak RSS (VmHWM): {st['VmHWM']:.0f} MiB (goal < 256); RSS while holding: max {max(samples):.0f}, last {samples[-1]:.0f} MiB")
    print(f"    body budget held at most {peak_budget / 1048576:.1f} MiB (webhook_body_bytes_in_flight)")
    print(f"    attempts at the silent URL: {attempts:.0f} timed out, {deferred:.0f} put back for the budget or the claim")
    print(f"    other tenant's delivery latency: before p50 {ltlib.pct(b, 50) * 1000:.0f} ms p99 {ltlib.pct(b, 99) * 1000:.0f} ms ({len(b)} events); "
          f"during p50 {ltlib.pct(d, 50) * 1000:.0f} ms p99 {ltlib.pct(d, 99) * 1000:.0f} ms ({len(d)} events)")
    print(f"    (tenant 0 has {len(received['chats'])} chats logged)")
    result = {
        "peak_rss_mib": round(st["VmHWM"]),
        "idle_rss_mib": round(idle["VmRSS"]),
        "budget_peak_mib": round(peak_budget / 1048576, 1),
        "latency_before_p50_ms": round(ltlib.pct(b, 50) * 1000),
        "latency_before_p99_ms": round(ltlib.pct(b, 99) * 1000),
        "latency_during_p50_ms": round(ltlib.pct(d, 50) * 1000) if d else None,
        "latency_during_p99_ms": round(ltlib.pct(d, 99) * 1000) if d else None,
        "median_during_ms": round(statistics.median(d) * 1000) if d else None,
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
