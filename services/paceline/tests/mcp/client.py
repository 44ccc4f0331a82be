"""Drives paceline's MCP endpoint with the official MCP Python SDK (`mcp` on PyPI), over
Streamable HTTP and over stdio (`paceline mcp`), and prints what it saw as one JSON
object. The Rust test (tests/it/mcp.rs) starts the cluster, runs this, and checks the
report and the network.

Environment: MCP_URL, MCP_ADMIN, MCP_INSTANCE, MCP_READ_ONLY, MCP_SEND_ONLY (tokens),
MCP_PHONE (a netsim phone to write to), MCP_INVALID (a number without an account),
PACELINE_BIN (the binary, for stdio); MCP_ACCOUNT (an account's token),
MCP_ACCOUNT_INSTANCE (its instance) and MCP_OTHER_INSTANCE (one outside it).
"""

import asyncio
import json
import os
import sys

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

ENV = os.environ
URL = ENV["MCP_URL"]


def over_http(token, mode="legacy"):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(URL, http_client=http), mode=mode)


def over_stdio(token):
    base = URL.rsplit("/mcp", 1)[0]
    params = StdioServerParameters(
        command=ENV["PACELINE_BIN"],
        args=["mcp"],
        env={"PACELINE_URL": base, "PACELINE_TOKEN": token},
    )
    return Client(params, mode="legacy")


def tool_result(r):
    return {
        "is_error": bool(r.is_error),
        "structured": r.structured_content,
        "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in r.content],
    }


async def names(client):
    return sorted(t.name for t in (await client.list_tools()).tools)


async def send_and_follow(client, text, progress=None):
    """send_message with wait, then get_message; plus an invalid number."""
    out = {}
    progress_seen = []

    async def on_progress(value, total, message):
        progress_seen.append({"progress": value, "message": message})

    sent = await client.call_tool(
        "send_message",
        {"to": ENV["MCP_PHONE"], "type": "text", "text": text, "wait": True},
        progress_callback=on_progress if progress else None,
    )
    out["send"] = tool_result(sent)
    out["progress"] = progress_seen
    msg_id = (sent.structured_content or {}).get("id")
    if msg_id:
        out["get"] = tool_result(await client.call_tool("get_message", {"msg_id": msg_id}))
    bad = await client.call_tool("send_message", {"to": ENV["MCP_INVALID"], "type": "text", "text": "x", "wait": True})
    out["invalid"] = tool_result(bad)
    return out


async def main():
    report = {}

    async with over_http(ENV["MCP_ADMIN"]) as admin:
        report["admin"] = {
            "protocol": admin.protocol_version,
            "server": admin.session.server_info.name if hasattr(admin.session, "server_info") else None,
            "tools": await names(admin),
            "instances": tool_result(await admin.call_tool("list_instances", {})),
            "no_instance_id": tool_result(await admin.call_tool("get_instance", {})),
        }

    async with over_http(ENV["MCP_INSTANCE"]) as inst:
        r = {"protocol": inst.protocol_version, "tools": await names(inst)}
        r["instances"] = tool_result(await inst.call_tool("list_instances", {}))
        r["instance"] = tool_result(await inst.call_tool("get_instance", {}))
        r.update(await send_and_follow(inst, "hello from mcp", progress=True))
        r["check"] = tool_result(await inst.call_tool("check_numbers", {"numbers": [ENV["MCP_PHONE"]]}))
        r["chats"] = tool_result(await inst.call_tool("list_chats", {"limit": 5}))
        resources = (await inst.list_resources()).resources
        r["resources"] = sorted(str(x.uri) for x in resources)
        if resources:
            read = await inst.read_resource(resources[0].uri)
            r["resource_text"] = read.contents[0].text
        report["instance"] = r

    # A read_only key, on the current protocol revision (no initialize handshake).
    async with over_http(ENV["MCP_READ_ONLY"], mode="auto") as ro:
        r = {"protocol": ro.protocol_version, "tools": await names(ro)}
        try:
            res = await ro.call_tool("send_message", {"to": ENV["MCP_PHONE"], "type": "text", "text": "no"})
            r["send"] = tool_result(res)
        except Exception as e:  # noqa: BLE001 - the refusal is what is checked
            r["send_refused"] = type(e).__name__ + ": " + str(e)
        report["read_only"] = r

    async with over_http(ENV["MCP_SEND_ONLY"]) as so:
        report["send_only"] = {"tools": await names(so)}

    async with over_http(ENV["MCP_ACCOUNT"]) as acct:
        r = {"tools": await names(acct)}
        r["instances"] = tool_result(await acct.call_tool("list_instances", {}))
        r["own"] = tool_result(await acct.call_tool("get_instance", {"instance_id": ENV["MCP_ACCOUNT_INSTANCE"]}))
        r["other"] = tool_result(await acct.call_tool("get_instance", {"instance_id": ENV["MCP_OTHER_INSTANCE"]}))
        report["account"] = r

    async with over_stdio(ENV["MCP_INSTANCE"]) as stdio:
        r = {"protocol": stdio.protocol_version, "tools": await names(stdio)}
        r.update(await send_and_follow(stdio, "hello over stdio"))
        report["stdio"] = r

    json.dump(report, sys.stdout)


asyncio.run(main())
