"""Evolution API compatibility (issue 20): Evolution's own Python client (`evolutionapi`
from PyPI, unchanged) drives a paceline cluster on netsim. Request and response shapes
follow Evolution API v2's documentation (https://doc.evolution-api.com/v2/api-reference/)
and sources (https://github.com/EvolutionAPI/evolution-api, src/api/routes/*.router.ts,
src/api/dto/*.dto.ts, src/api/integrations/channel/whatsapp/whatsapp.baileys.service.ts).

Environment: EVO_URL (the API), EVO_ADMIN (the admin token: Evolution's global key),
NETSIM (netsim's control API), SHOP and BIZ (netsim numbers to pair; BIZ is a business
account), FRIEND and NEWBIE (contacts with accounts), NOBODY (a number without one),
EVO_ACCOUNT (an account's token: the global key of its own instances).
Prints one JSON object with what each step saw; the Rust test asserts on it.
"""

import base64
import http.server
import json
import os
import queue
import sys
import tempfile
import threading
import time
import urllib.request

import requests

from evolutionapi.client import EvolutionClient
from evolutionapi.models.chat import ArchiveChat, CheckIsWhatsappNumber, MessageKey, ReadMessage, UpdateMessage
from evolutionapi.models.chat import MediaMessage as MediaOfMessage
from evolutionapi.models.chat import ProfilePicture as PictureOf
from evolutionapi.models.group import CreateGroup, GroupInvite, GroupPicture, ToggleEphemeral, UpdateParticipant
from evolutionapi.models.instance import InstanceConfig
from evolutionapi.models.presence import PresenceStatus
from evolutionapi.models.profile import FetchProfile, ProfileName, ProfileStatus
from evolutionapi.models.message import (
    Contact,
    ContactMessage,
    LocationMessage,
    MediaMessage,
    PollMessage,
    QuotedMessage,
    ReactionMessage,
    TextMessage,
)

URL = os.environ["EVO_URL"]
ADMIN = os.environ["EVO_ADMIN"]
NETSIM = os.environ["NETSIM"]
SHOP, BIZ = os.environ["SHOP"], os.environ["BIZ"]
FRIEND, NEWBIE, NOBODY = os.environ["FRIEND"], os.environ["NEWBIE"], os.environ["NOBODY"]
# A contact with an account who is in no group (gets the group's invite).
NOBODY_GROUPLESS = os.environ["OUTSIDER"]
# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def control(method, path, body=None):
    req = urllib.request.Request(
        NETSIM + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


def until(what, f, seconds=60, show=None):
    deadline = time.time() + seconds
    while time.time() < deadline:
        v = f()
        if v:
            return v
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}: {show() if show else ''}")


def paired(client, name, number):
    """instance/create with qrcode: true, netsim scans the QR, connectionState turns open."""
    created = client.instances.create_instance(InstanceConfig(instanceName=name, qrcode=True))
    token = created["hash"]
    control("POST", "/control/scan", {"code": created["qrcode"]["code"], "number": number})
    state = until(
        f"{name} open",
        lambda: (s := client.instance_operations.get_connection_state(name, token))["instance"]["state"] == "open"
        and s,
    )
    return created, token, state


class Hook(http.server.BaseHTTPRequestHandler):
    got = queue.Queue()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        Hook.got.put({"path": self.path, "body": json.loads(body), "headers": dict(self.headers)})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    out = {}
    client = EvolutionClient(URL, ADMIN)

    # 1. Create and connect (the QR scanned by netsim).
    created, token, state = paired(client, "evo-shop", SHOP)
    out["create"] = {k: created[k] for k in ("instance", "qrcode")}
    out["create"]["hash_prefix"] = created["hash"][:8]
    out["connection_state"] = state
    out["fetch_admin"] = client.instances.fetch_instances()
    # The instance's own token sees only its instance.
    out["fetch_own"] = EvolutionClient(URL, token).instances.fetch_instances()
    # An account's token is the global key of its own instances: it creates inside the
    # account and lists only those.
    account = EvolutionClient(URL, os.environ["EVO_ACCOUNT"])
    made = account.instances.create_instance(InstanceConfig(instanceName="evo-account", qrcode=False))
    out["account_create"] = made["instance"]
    out["account_fetch"] = sorted(i["name"] for i in account.instances.fetch_instances())
    try:
        EvolutionClient(URL, "pl_inst_not_a_token").instances.fetch_instances()
        out["bad_key"] = "accepted"
    except Exception as e:  # EvolutionAuthenticationError on 401
        out["bad_key"] = type(e).__name__

    # 2. Sends: text, media (multipart file, and base64), location, contact, poll, reaction.
    m = client.messages
    sends = {}
    sends["text"] = m.send_text("evo-shop", TextMessage(number=FRIEND, text="Hello from Evolution", delay=1200), token)
    with tempfile.NamedTemporaryFile(suffix=".png", delete=False) as f:
        f.write(PNG)
    sends["media_file"] = m.send_media(
        "evo-shop",
        MediaMessage(number=FRIEND, mediatype="image", mimetype="image/png", caption="a dot", fileName="dot.png"),
        token,
        file=f.name,
    )
    # (The client's send_media always posts multipart and leaves `media` out: base64 in
    # JSON goes through its generic post, as Evolution's documentation shows it.)
    sends["media_base64"] = client.post(
        "message/sendMedia/evo-shop",
        {
            "number": FRIEND,
            "mediatype": "document",
            "mimetype": "application/pdf",
            "caption": "the order",
            "fileName": "order.pdf",
            "media": base64.b64encode(b"%PDF-1.4 order").decode(),
        },
        token,
    )
    sends["location"] = m.send_location(
        "evo-shop",
        LocationMessage(number=FRIEND, name="Shop", address="Av. Paulista, 1000", latitude=-23.56, longitude=-46.65),
        token,
    )
    sends["contact"] = m.send_contact(
        "evo-shop",
        ContactMessage(number=FRIEND, contact=[Contact(fullName="Ana", wuid=NEWBIE, phoneNumber="+" + NEWBIE)]),
        token,
    )
    sends["poll"] = m.send_poll(
        "evo-shop", PollMessage(number=FRIEND, name="Pickup or delivery?", selectableCount=1, values=["pickup", "delivery"]), token
    )
    text_key = sends["text"]["key"]
    sends["reaction"] = m.send_reaction(
        "evo-shop", ReactionMessage(key={"remoteJid": text_key["remoteJid"], "fromMe": True, "id": text_key["id"]}, reaction="👍"), token
    )
    with tempfile.NamedTemporaryFile(suffix=".mp4", delete=False) as v:
        v.write(b"\x00\x00\x00\x18ftypmp42" + bytes(32))
    out["ptv"] = m.send_ptv("evo-shop", {"number": NEWBIE}, token, file=v.name)
    sends["list"] = client.post(
        "message/sendList/evo-shop", {"number": FRIEND, "title": "t", "description": "d", "buttonText": "b", "footerText": "f", "sections": []}, token
    )
    out["sends"] = sends
    # The friend's phone gets them, in order.
    inbox = until(
        "the friend's inbox",
        lambda: (msgs := [x for x in control("GET", f"/control/phones/{FRIEND}/inbox")["messages"] if x["from"] == SHOP])
        and len(msgs) >= 7
        and msgs,
        show=lambda: (sends, control("GET", f"/control/phones/{FRIEND}/inbox")),
    )
    out["inbox_types"] = [x["type"] for x in inbox]
    # The network ids the phone knows them by (the reaction names its target by one).
    out["inbox_ids"] = {x["type"]: x["id"] for x in inbox}
    out["inbox_reaction"] = next(x["body"]["reaction"] for x in inbox if x["type"] == "reaction")

    # 3. Find the messages (the local log, sent ones as they were sent).
    friend_jid = f"{FRIEND}@s.whatsapp.net"
    out["find_all"] = until(
        "findMessages sees the sends",
        lambda: (r := client.chat.get_messages("evo-shop", friend_jid, token, offset=50))["messages"]["total"] >= 7 and r,
    )
    out["find_text"] = client.chat.get_messages("evo-shop", friend_jid, token, whatsapp_message_id=text_key["id"])
    out["find_page"] = client.chat.get_messages("evo-shop", friend_jid, token, page=2, offset=3)

    # 4. Check numbers.
    out["numbers"] = client.chat.check_is_whatsapp_numbers("evo-shop", CheckIsWhatsappNumber(numbers=[FRIEND, NOBODY]), token)

    # 5. A group, and its members changed.
    group = client.group.create_group("evo-shop", CreateGroup(subject="Orders", participants=[FRIEND], description="orders desk"), token)
    out["group"] = group
    out["group_add"] = client.group.update_participant("evo-shop", group["id"], UpdateParticipant(action="add", participants=[NEWBIE]), token)
    out["group_promote"] = client.group.update_participant(
        "evo-shop", group["id"], UpdateParticipant(action="promote", participants=[NEWBIE]), token
    )
    out["group_members"] = client.group.get_participants("evo-shop", group["id"], token)
    # A text to the group mentioning every member, quoting the first text. (The client's
    # send_text posts only number, text and delay: the rest goes through its post.)
    quoted = QuotedMessage(key={"id": text_key["id"]})
    out["group_text"] = client.post(
        "message/sendText/evo-shop",
        {"number": group["id"], "text": "@all orders close at 6", "mentionsEveryOne": True, "quoted": quoted.__dict__},
        token,
    )
    out["group_copy"] = until(
        "the group text at the new member",
        lambda: [x for x in control("GET", f"/control/phones/{NEWBIE}/inbox")["messages"] if x.get("group") == group["id"]],
    )[0]["body"]

    # findChats and findContacts with Evolution's filters and windows (the client has no
    # method for them: its post, as n8n's node sends them). No body lists them all.
    # The phone holding the copy does not mean the log has the group's chat yet: the
    # worker records the send after the network's ack, so wait for the chat itself.
    out["chats_none"] = until(
        "the group's chat in the log",
        lambda: (cs := client.post("chat/findChats/evo-shop", None, token))
        and any(c.get("remoteJid") == group["id"] for c in cs)
        and cs,
    )
    out["chats_all"] = client.post("chat/findChats/evo-shop", {"where": None}, token)
    out["chats_one"] = client.post("chat/findChats/evo-shop", {"where": {"remoteJid": FRIEND}}, token)
    out["chats_window"] = client.post("chat/findChats/evo-shop", {"take": 1, "skip": 1}, token)
    out["chats_bad"] = client.post("chat/findChats/evo-shop", {"where": {"remoteJid": "not a number"}}, token)
    out["chats_take_bad"] = client.post("chat/findChats/evo-shop", {"take": 0}, token)
    out["contacts_all"] = client.post("chat/findContacts/evo-shop", None, token)
    out["contacts_one"] = client.post("chat/findContacts/evo-shop", {"where": {"remoteJid": friend_jid}}, token)
    out["contacts_page1"] = client.post("chat/findContacts/evo-shop", {"offset": 1}, token)
    out["contacts_page2"] = client.post("chat/findContacts/evo-shop", {"offset": 1, "page": 2}, token)

    # 6. Labels on a business account (made on the phone).
    _, biz_token, _ = paired(client, "evo-biz", BIZ)
    control("POST", f"/control/phones/{BIZ}/labels", {"label_id": "7", "name": "VIP", "color": 3})
    out["labels"] = until("the phone's label", lambda: client.label.find_labels("evo-biz", biz_token))
    try:
        client.label.find_labels("evo-shop", token)
        out["labels_personal"] = "accepted"
    except Exception as e:  # a personal account: 400 business_account_required
        out["labels_personal"] = str(e)

    # More of Evolution's routes, through the client's own methods where it has them.
    more = {}
    friend = f"{FRIEND}@s.whatsapp.net"
    more["profile_name"] = client.profile.update_profile_name("evo-shop", ProfileName(name="Shop Bot"), token)
    more["profile_status"] = client.profile.update_profile_status("evo-shop", ProfileStatus(status="open 9-18"), token)
    more["fetch_profile"] = client.profile.fetch_profile("evo-shop", FetchProfile(number=FRIEND), token)
    more["privacy_set"] = client.post("chat/updatePrivacySettings/evo-shop", {"readreceipts": "none"}, token)
    more["privacy"] = client.profile.fetch_privacy_settings("evo-shop", token)
    more["settings_set"] = client.post("settings/set/evo-shop", {"rejectCall": True, "msgCall": "busy", "groupsIgnore": False}, token)
    more["settings_find"] = client.get("settings/find/evo-shop", token)
    more["settings_bad"] = client.post("settings/set/evo-shop", {"alwaysOnline": True}, token)
    more["presence"] = client.post("chat/sendPresence/evo-shop", {"number": FRIEND, "presence": "composing", "delay": 1000}, token)
    more["typing_from"] = control("GET", f"/control/phones/{FRIEND}")["typing_from"]
    more["set_presence"] = client.instance_operations.set_presence("evo-shop", PresenceStatus.AVAILABLE, token)
    more["presence_shown"] = control("GET", f"/control/phones/{SHOP}")["presence"]
    more["archive"] = client.chat.archive_chat("evo-shop", ArchiveChat(last_message={}, chat=friend, archive=True), token)
    more["read"] = client.chat.mark_message_as_read("evo-shop", [ReadMessage(remote_jid=friend, from_me=False, id="x")], token)
    more["picture"] = client.chat.fetch_profile_picture_url("evo-shop", PictureOf(number=FRIEND), token)
    more["status"] = client.post("message/sendStatus/evo-shop", {"type": "text", "content": "open today", "allContacts": True}, token)
    media_id = sends["media_file"]["key"]["id"]
    more["base64"] = client.chat.get_base64_from_media_message("evo-shop", MediaOfMessage(message={"key": {"id": media_id}}), token)
    more["base64_matches"] = more["base64"].get("base64") == base64.b64encode(PNG).decode()
    more["base64"].pop("base64", None)
    more["block"] = client.post("message/updateBlockStatus/evo-shop", {"number": NEWBIE, "status": "block"}, token)
    more["unblock"] = client.post("message/updateBlockStatus/evo-shop", {"number": NEWBIE, "status": "unblock"}, token)
    # Edit the first text, delete the location, with the client's own methods.
    more["edit"] = client.chat.update_message(
        "evo-shop", UpdateMessage(number=FRIEND, key={"id": text_key["id"], "remoteJid": friend, "fromMe": True}, text="Hello (edited)"), token
    )
    location_id = sends["location"]["key"]["id"]
    # (The client's delete_message_for_everyone passes `data` to its delete(), which takes
    # none: the route is called with its headers and requests, as Evolution documents it.)
    def revoke(key):
        r = requests.delete(f"{URL}/chat/deleteMessageForEveryone/evo-shop", headers=client._get_headers(token), json=key.__dict__)
        return r.json()

    more["revoke"] = revoke(MessageKey(friend, True, location_id))
    copies = {x["id"]: x for x in control("GET", f"/control/phones/{FRIEND}/inbox")["messages"]}
    more["edited_copy"] = copies[text_key["id"]]
    more["revoked_copy"] = copies[location_id]
    more["revoke_theirs"] = revoke(MessageKey(friend, False, "X"))
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(64) + b"\xff\xd9").decode()
    more["group_picture"] = client.group.update_group_picture("evo-shop", group["id"], GroupPicture(image=jpeg), token)
    more["group_on_network"] = control("GET", f"/control/groups/{group['id']}")
    more["group_picture_png"] = client.group.update_group_picture(
        "evo-shop", group["id"], GroupPicture(image=base64.b64encode(PNG).decode()), token
    )
    code = client.group.get_invite_code("evo-shop", group["id"], token)["inviteCode"]
    more["invite_info"] = client.group.get_invite_info("evo-shop", code, token)
    more["ephemeral"] = client.group.toggle_ephemeral("evo-shop", group["id"], ToggleEphemeral(expiration=604800), token)
    more["ephemeral_bad"] = client.group.toggle_ephemeral("evo-shop", group["id"], ToggleEphemeral(expiration=5), token)
    more["ephemeral_shown"] = client.group.get_group_info("evo-shop", group["id"], token)["ephemeralDuration"]
    more["send_invite"] = client.group.send_invite(
        "evo-shop", GroupInvite(groupJid=group["id"], description="Join our orders group", numbers=[NOBODY_GROUPLESS]), token
    )
    more["invite_text"] = until(
        "the invite at its recipient",
        lambda: [x["text"] for x in control("GET", f"/control/phones/{NOBODY_GROUPLESS}/inbox")["messages"] if x["from"] == SHOP],
    )
    out["more"] = more

    # 7. A webhook in Evolution's format gets messages.upsert for an incoming message.
    server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook_url = f"http://127.0.0.1:{server.server_port}/evolution"
    out["webhook_set"] = client.post(
        "webhook/set/evo-shop",
        {"webhook": {"enabled": True, "url": hook_url, "byEvents": True, "base64": False, "events": ["MESSAGES_UPSERT"]}},
        token,
    )
    out["webhook_find"] = client.get("webhook/find/evo-shop", token)
    control("POST", f"/control/phones/{FRIEND}/messages", {"to": SHOP, "text": "is my order ready?"})
    got = Hook.got.get(timeout=30)
    out["webhook_delivery"] = {"path": got["path"], "body": got["body"], "signed": "webhook-signature" in {k.lower() for k in got["headers"]}}
    try:
        more = Hook.got.get(timeout=2)
        out["webhook_extra"] = more["body"].get("event")
    except queue.Empty:
        out["webhook_extra"] = None
    # webhook_base64: a received image comes with its bytes.
    out["webhook_base64_set"] = client.post("webhook/set/evo-shop", {"webhook": {"base64": True, "events": ["MESSAGES_UPSERT"]}}, token)
    control(
        "POST",
        f"/control/phones/{FRIEND}/messages",
        {"to": SHOP, "type": "image", "text": "the receipt", "media": {"data": base64.b64encode(PNG).decode(), "mime_type": "image/png"}},
    )
    # Anything before the image is an event nobody asked for, come later than the window
    # above: kept to be reported, not taken for the image.
    out["webhook_extra_late"] = []
    while (got := Hook.got.get(timeout=30))["body"].get("data", {}).get("messageType") != "imageMessage":
        out["webhook_extra_late"].append(got["body"].get("event"))
    message = got["body"]["data"]["message"]
    out["webhook_image"] = {
        "type": got["body"]["data"]["messageType"],
        "caption": message.get("imageMessage", {}).get("caption"),
        "base64_matches": message.get("base64") == base64.b64encode(PNG).decode(),
    }

    # The proxy: the admin's to set (the client's own key is the global one); its
    # password is never shown.
    out["proxy_instance"] = client.post("proxy/set/evo-biz", {"enabled": True, "host": "10.0.0.1", "port": "3128", "protocol": "http"}, biz_token)
    out["proxy_set"] = client.post(
        "proxy/set/evo-biz", {"enabled": True, "host": "10.0.0.1", "port": "3128", "protocol": "http", "username": "u", "password": "s3cret-pass"}
    )
    out["proxy_find"] = client.get("proxy/find/evo-biz", biz_token)
    out["proxy_off"] = client.post("proxy/set/evo-biz", {"enabled": False})

    # instance/create with Evolution's webhook object: registered with the instance; a
    # refused webhook creates nothing.
    out["create_hooked"] = client.post(
        "instance/create", {"instanceName": "evo-hooked", "webhook": {"url": hook_url, "events": ["CONNECTION_UPDATE"]}}
    )
    out["create_bad_hook"] = client.post(
        "instance/create", {"instanceName": "evo-unhooked", "webhook": {"url": hook_url, "headers": {"x": "y"}}}
    )
    out["unhooked_listed"] = [i["name"] for i in client.instances.fetch_instances() if i["name"] == "evo-unhooked"]

    # Logout and delete, as Evolution's client does them.
    out["logout"] = client.instance_operations.logout("evo-biz", biz_token)
    out["delete"] = client.instance_operations.delete("evo-biz", biz_token)
    server.shutdown()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
