"""What the Python load scripts share: one JSON call to the API or netsim, retried on
409 and 503 (stdlib only)."""

import json
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
    """Registers `number` on netsim, creates the instance (`body`), connects it and has the
    phone scan its QR. Returns (instance id, instance token)."""
    call("POST", f"{netsim}/control/phones", {"number": number})
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
