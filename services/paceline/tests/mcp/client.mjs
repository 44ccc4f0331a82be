// Drives paceline's MCP endpoint with the official MCP TypeScript SDK
// (`@modelcontextprotocol/sdk` from npm, what most desktop and IDE assistants use), over
// Streamable HTTP and over stdio (`paceline mcp`), and prints what it saw as one JSON
// object in the shape tests/mcp/client.py prints. The SDK checks every tool result's
// `structuredContent` against the tool's `outputSchema`, errors included: a result that
// does not match makes `callTool` throw, and the run fails.
//
// Environment: as client.py, plus MCP_NODE_MODULES (where the SDK is installed).

import { join } from "node:path";
import { pathToFileURL } from "node:url";

const ENV = process.env;
const sdk = (p) => import(pathToFileURL(join(ENV.MCP_NODE_MODULES, "@modelcontextprotocol/sdk/dist/esm", p)).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { StdioClientTransport } = await sdk("client/stdio.js");

const URL_ = ENV.MCP_URL;

async function connect(transport) {
  const client = new Client({ name: "paceline-ts-test", version: "1.0.0" });
  await client.connect(transport);
  return client;
}

const overHttp = (token) =>
  connect(new StreamableHTTPClientTransport(new URL(URL_), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));

const overStdio = (token) =>
  connect(
    new StdioClientTransport({
      command: ENV.PACELINE_BIN,
      args: ["mcp"],
      env: { PACELINE_URL: URL_.replace(/\/mcp$/, ""), PACELINE_TOKEN: token },
      stderr: "inherit",
    }),
  );

const toolResult = (r) => ({ is_error: Boolean(r.isError), structured: r.structuredContent ?? null, content: r.content });

const names = async (client) => (await client.listTools()).tools.map((t) => t.name).sort();

// send_message with wait, then get_message; plus an invalid number (with and without
// progress: an event stream and a JSON answer).
async function sendAndFollow(client, text, progress) {
  const out = {};
  const seen = [];
  const options = progress ? { onprogress: (p) => seen.push(p), timeout: 120000 } : { timeout: 120000 };
  const sent = await client.callTool(
    { name: "send_message", arguments: { to: ENV.MCP_PHONE, type: "text", text, wait: true } },
    undefined,
    options,
  );
  out.send = toolResult(sent);
  out.progress = seen;
  const id = sent.structuredContent?.id;
  if (id) out.get = toolResult(await client.callTool({ name: "get_message", arguments: { msg_id: id } }));
  const bad = await client.callTool(
    { name: "send_message", arguments: { to: ENV.MCP_INVALID, type: "text", text: "x", wait: true } },
    undefined,
    options,
  );
  out.invalid = toolResult(bad);
  return out;
}

const report = {};

let c = await overHttp(ENV.MCP_ADMIN);
report.admin = {
  protocol: c.transport?.protocolVersion ?? null,
  tools: await names(c),
  instances: toolResult(await c.callTool({ name: "list_instances", arguments: {} })),
  no_instance_id: toolResult(await c.callTool({ name: "get_instance", arguments: {} })),
};
await c.close();

c = await overHttp(ENV.MCP_INSTANCE);
{
  const r = { tools: await names(c) };
  r.instances = toolResult(await c.callTool({ name: "list_instances", arguments: {} }));
  r.instance = toolResult(await c.callTool({ name: "get_instance", arguments: {} }));
  Object.assign(r, await sendAndFollow(c, "hello from the typescript sdk", true));
  r.check = toolResult(await c.callTool({ name: "check_numbers", arguments: { numbers: [ENV.MCP_PHONE] } }));
  r.chats = toolResult(await c.callTool({ name: "list_chats", arguments: { limit: 5 } }));
  const resources = (await c.listResources()).resources;
  r.resources = resources.map((x) => x.uri).sort();
  if (resources.length) r.resource_text = (await c.readResource({ uri: resources[0].uri })).contents[0].text;
  report.instance = r;
}
await c.close();

c = await overHttp(ENV.MCP_READ_ONLY);
{
  const r = { tools: await names(c) };
  try {
    r.send = toolResult(await c.callTool({ name: "send_message", arguments: { to: ENV.MCP_PHONE, type: "text", text: "no" } }));
  } catch (e) {
    r.send_refused = `${e.name}: ${e.message}`;
  }
  report.read_only = r;
}
await c.close();

c = await overHttp(ENV.MCP_SEND_ONLY);
report.send_only = { tools: await names(c) };
await c.close();

c = await overStdio(ENV.MCP_INSTANCE);
report.stdio = { tools: await names(c), ...(await sendAndFollow(c, "hello over typescript stdio", false)) };
await c.close();

process.stdout.write(JSON.stringify(report));
