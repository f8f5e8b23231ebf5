// The official MCP TypeScript SDK's client against Cubicle: over streamable
// HTTP at $CUBICLE_URL/mcp (MODE=http) or through `$CUBICLE_BIN mcp` over
// stdio (MODE=stdio), with the key $CUBICLE_KEY. It prints one JSON object
// of what it saw; internal/mcp's TestMCPTypeScriptClient checks it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const { CUBICLE_URL: url, CUBICLE_KEY: key, LIMITED_KEY: limitedKey, MODE: mode = "http", CUBICLE_BIN: bin } = process.env;

function transport(k) {
  if (mode === "stdio") {
    return new StdioClientTransport({ command: bin, args: ["mcp"], env: { ...process.env, CUBICLE_URL: url, CUBICLE_KEY: k } });
  }
  return new StreamableHTTPClientTransport(new URL(url + "/mcp"), {
    requestInit: { headers: { Authorization: `Bearer ${k}` } },
  });
}

async function connect(k) {
  const c = new Client({ name: "cubicle-ts-test", version: "1.0.0" });
  await c.connect(transport(k));
  return c;
}

const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
const out = { mode };

// A key the server does not know is refused before any tool is listed.
try {
  const c = await connect("cub_not_a_key");
  out.badKey = "connected";
  await c.close();
} catch (e) {
  out.badKey = String(e?.message ?? e);
}

// A key without the computer capability is refused the tool.
if (limitedKey) {
  const c = await connect(limitedKey);
  const r = await c.callTool({ name: "create_computer", arguments: {} });
  out.limited = { isError: !!r.isError, text: text(r) };
  await c.close();
}

const client = await connect(key);
out.server = client.getServerVersion()?.name;
const { tools } = await client.listTools();
out.tools = tools.map((t) => ({ name: t.name, required: t.inputSchema.required ?? [], described: !!t.description }));
const call = (name, args) => client.callTool({ name, arguments: args });

const created = await call("create_computer", { lifetime_seconds: 120 });
const id = created.structuredContent?.id;
out.created = { isError: !!created.isError, id, status: created.structuredContent?.status };
out.exec = text(await call("exec", { computer_id: id, command: "echo hello from ts" }));
out.write = text(await call("write_file", { computer_id: id, path: "ts/hello.txt", content: "written by ts" }));
out.read = text(await call("read_file", { computer_id: id, path: "ts/hello.txt" }));
out.listed = text(await call("list_files", { computer_id: id, path: "ts" }));
const py = await call("python", { computer_id: id, cells: [{ code: "plt.plot([3, 1, 2]); plt.show()\nprint('ts plot')" }] });
out.python = {
  isError: !!py.isError,
  text: text(py),
  images: py.content.filter((c) => c.type === "image").map((c) => ({ mimeType: c.mimeType, magic: Buffer.from(c.data, "base64").subarray(0, 8).toString("hex") })),
};
const bad = await call("exec", { computer_id: id });
out.badArgs = { isError: !!bad.isError, text: text(bad) };
out.deleted = text(await call("delete_computer", { computer_id: id }));
const again = await call("delete_computer", { computer_id: id });
out.deletedAgain = { isError: !!again.isError, text: text(again) };
await client.close();
console.log(JSON.stringify(out));
