// Drives a named view through `snodod connect --view NAME` (the running
// daemon found through this process's environment) with the official
// TypeScript MCP client, and prints one JSON summary of what it observed:
// the tools listed, the text of a call of an allowed tool, and the error
// of a call outside the view. The Go test e2e/views_test.go checks the
// summary; this script judges nothing itself.
//
//   node views.mjs <snodod binary> <view> <allowed tool> <tool outside>

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [binary, view, allowed, outside] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: binary, args: ['connect', '--view', view], env: process.env, stderr: 'inherit' });
const client = new Client({ name: 'e2e-ts-views', version: '1' });
await client.connect(transport);
const out = {};
out.server = client.getServerVersion()?.name;
out.instructions = client.getInstructions() ?? '';
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const res = await client.callTool({ name: allowed, arguments: { x: 1 } });
out.allowed = { isError: res.isError ?? false, text: (res.content ?? []).map((c) => c.text ?? '').join('') };
try {
  await client.callTool({ name: outside, arguments: {} });
  out.outside = { code: 0, message: 'served' };
} catch (e) {
  out.outside = { code: e.code ?? 0, message: e.message ?? String(e) };
}
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
