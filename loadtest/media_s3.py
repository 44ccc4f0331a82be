"""Pairs 16 netsim instances (unsafe pacing, 20 ms apart), posts `count` documents by
`media.url` to them, `concurrency` at a time, and waits until the worker (metrics on
127.0.0.1:9476) has sent them all. Prints accepted, failed, accept MB/s and request
latency percentiles, then sent, failed and send throughput (stdlib only).
Usage: media_s3.py API NETSIM ADMIN COUNT URL CONCURRENCY"""

import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import ltlib
from ltlib import call, pct

INSTANCES = 16
WORKER_METRICS = "http://127.0.0.1:9476/metrics"


def sends(result):
    try:
        text = urllib.request.urlopen(WORKER_METRICS, timeout=5).read().decode()
    except OSError:
        return 0
    return int(ltlib.metric_sum(text, f'paceline_queue_sends_total{{result="{result}"}}'))


def main():
    api, netsim, admin = sys.argv[1], sys.argv[2], sys.argv[3]
    count, url, conc = int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
    stamp = int(time.time())
    recipient = f"55118{stamp % 100000:05d}9999"
    call("POST", f"{netsim}/control/phones", {"number": recipient})
    insts = []
    for i in range(INSTANCES):
        body = {"name": f"media-s3-{stamp}-{i}", "min_interval_ms": 20, "max_per_minute": 100000, "unsafe_pacing": True}
        insts.append(ltlib.pair(api, netsim, admin, f"55117{stamp % 100000:05d}{i:04d}", body))
    deadline = time.time() + 120
    while ltlib.connected(api, admin) < INSTANCES:
        if time.time() > deadline:
            raise SystemExit("the instances did not all connect")
        time.sleep(0.5)
    print(f"    {INSTANCES} instances paired and connected")
    lock = threading.Lock()
    todo = list(range(count))
    lat, failed = [], []

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                n = todo.pop()
            inst, token = insts[n % len(insts)]
            body = {"to": recipient, "type": "document",
                    "media": {"url": url, "mime_type": "application/pdf", "filename": f"d{n}.pdf"}}
            t = time.monotonic()
            try:
                call("POST", f"{api}/v1/instances/{inst}/messages", body, token, expect=())
                with lock:
                    lat.append(time.monotonic() - t)
            except RuntimeError as e:
                with lock:
                    failed.append(str(e)[:200])

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    secs = time.monotonic() - start
    mb = float(os.environ.get("MEDIA_MB", "1"))
    print(f"    accepted {len(lat)} of {count} in {secs:.1f} s: {len(lat) / secs:.1f} media/s, ~{len(lat) * mb / secs:.1f} MB/s")
    if lat:
        print(f"    accept latency p50 {pct(lat, 50) * 1000:.0f} ms, p99 {pct(lat, 99) * 1000:.0f} ms")
    if failed:
        print(f"    {len(failed)} refused, e.g. {failed[0]}")
    # The worker sends while accepts go on; wait for the rest.
    deadline = time.monotonic() + 600
    while sends("sent") + sends("failed") < len(lat) and time.monotonic() < deadline:
        time.sleep(0.2)
    took = time.monotonic() - start
    sent, lost = sends("sent"), sends("failed")
    print(f"    sent {sent} of {len(lat)} ({lost} failed) {took:.1f} s after the first accept: "
          f"{sent / took:.1f} media/s, ~{sent * mb / took:.1f} MB/s read back from the bucket")


if __name__ == "__main__":
    main()
