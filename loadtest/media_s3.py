"""Posts `count` documents by `media.url` to 8 unpaired instances, `concurrency` at a
time, and prints accepted, failed, MB/s and request latency percentiles (stdlib only).
Usage: media_s3.py API ADMIN COUNT URL CONCURRENCY"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from ltlib import call, pct


def main():
    api, admin, count, url, conc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    stamp = int(time.time())
    insts = []
    for i in range(8):
        made = call("POST", f"{api}/v1/instances", {"name": f"media-s3-{stamp}-{i}"}, admin)
        insts.append((made["instance"]["id"], made["token"]))
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
            body = {"to": "5511999990001", "type": "document",
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
    mb = len(lat) * float(os.environ.get("MEDIA_MB", "1"))
    print(f"    accepted {len(lat)} of {count} in {secs:.1f} s: {len(lat) / secs:.1f} media/s, ~{mb / secs:.1f} MB/s")
    if lat:
        print(f"    latency p50 {pct(lat, 50) * 1000:.0f} ms, p99 {pct(lat, 99) * 1000:.0f} ms")
    if failed:
        print(f"    {len(failed)} failed, e.g. {failed[0]}")


if __name__ == "__main__":
    main()
