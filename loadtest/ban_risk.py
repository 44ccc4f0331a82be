"""Ban-risk simulation (loadtest/ban-risk.sh): against netsim with its spam rule (a
temporary ban past BAN first contacts an hour), one instance runs a spam-like workload
(the same text to strangers, half of them numbers without an account) and another a
conversational one (people write first, it answers each), both paced at INTERVAL_MS.
Reports how many sends each got through, whether the network banned it and whether the
gateway paused it first. Run once with the deployment's adaptive policies and once with
them off (the shell script sets PACELINE_RISK_*). Stdlib only."""

import os
import time

import ltlib
from ltlib import call

API = os.environ.get("API", "http://127.0.0.1:8787")
NETSIM = os.environ.get("NETSIM", "http://127.0.0.1:8790")
ADMIN = os.environ["PACELINE_ADMIN_TOKEN"]
MODE = os.environ.get("MODE", "adaptive")
BAN = int(os.environ.get("BAN", "40"))
SENDS = int(os.environ.get("SENDS", "160"))
INTERVAL_MS = int(os.environ.get("INTERVAL_MS", "250"))
LIMIT_S = int(os.environ.get("LIMIT_S", "120"))
RUN = int(time.time()) % 100000


def number(kind, i):
    return f"55{kind}{RUN % 1000:03d}{i:04d}"


def instance(name, phone):
    body = {"name": f"{name}-{RUN}", "min_interval_ms": INTERVAL_MS, "max_per_minute": 100000, "unsafe_pacing": True}
    inst, token = ltlib.pair(API, NETSIM, ADMIN, phone, body)
    for _ in range(100):
        if call("GET", f"{API}/v1/instances/{inst}", None, ADMIN)["state"] == "connected":
            break
        time.sleep(0.2)
    return inst, token


def state(inst):
    i = call("GET", f"{API}/v1/instances/{inst}", None, ADMIN)
    sent = call("GET", f"{API}/v1/instances/{inst}/usage", None, ADMIN)["totals"]["messages_sent"]
    banned = "temporarily banned" in (i.get("state_reason") or "")
    held = (i.get("effective_pacing") or {}).get("first_contacts_held", False)
    return sent, banned, i.get("queue_paused"), i.get("risk") or {}, held


def main():
    call("POST", f"{NETSIM}/control/faults", {"first_contact_ban": BAN})
    spam, _ = instance("spam", number("11911", 1))
    talk, talk_token = instance("talk", number("11912", 1))
    contacts = [number("11913", i) for i in range(SENDS)]
    strangers = [number("11914", i) for i in range(SENDS // 2)]
    for n in contacts + strangers:
        call("POST", f"{NETSIM}/control/phones", {"number": n})
    # Conversational: each contact writes first; the instance answers each in its own words.
    for n in contacts:
        call("POST", f"{NETSIM}/control/phones/{n}/messages", {"to": number("11912", 1), "text": "hi, is my order ready?"})
    time.sleep(2)
    for i, n in enumerate(contacts):
        m = {"to": n, "type": "text", "text": f"Hello! Order {1000 + i} ships today."}
        call("POST", f"{API}/v1/instances/{talk}/messages", m, talk_token)
    # Spam: the same text to strangers, every other one a number without an account.
    for i in range(SENDS):
        to = strangers[i // 2] if i % 2 == 0 else number("11915", i)
        call("POST", f"{API}/v1/instances/{spam}/messages", {"to": to, "type": "text", "text": "BIG SALE 90% OFF"}, ADMIN)
    start = time.time()
    outcome = {}
    while time.time() - start < LIMIT_S:
        for name, inst in (("spam", spam), ("conversational", talk)):
            sent, banned, paused, risk, held = state(inst)
            o = outcome.setdefault(name, {})
            o.update(sent=sent, risk=risk.get("score"), level=risk.get("level"))
            if held and "held_after" not in o:
                o["held_after"] = sent
            if banned and "banned_after" not in o:
                o["banned_after"] = sent
            if paused and "paused_after" not in o:
                o["paused_after"] = sent
                o["paused_for"] = paused["reason"]
        s = outcome["spam"]
        if ("banned_after" in s or "paused_after" in s) and outcome["conversational"]["sent"] >= SENDS:
            break
        time.sleep(1)
    print(f"mode {MODE}: netsim bans past {BAN} first contacts an hour; {SENDS} sends queued on each, one every {INTERVAL_MS} ms")
    for name in ("spam", "conversational"):
        o = outcome[name]
        ban = f"banned after {o['banned_after']} sends" if "banned_after" in o else "not banned"
        pause = f"paused ({o['paused_for']}) after {o['paused_after']} sends" if "paused_after" in o else "not paused"
        hold = f"first contacts held from {o['held_after']} sends" if "held_after" in o else "never held"
        print(f"  {name:15s} sent {o['sent']:4d}; {ban}; {hold}; {pause}; risk {o['risk']} ({o['level']})")


if __name__ == "__main__":
    main()
