// Keeps the official TypeScript MCP client busy on one session of a
// running `snodod serve` (through `snodod connect`, which it starts) while
// the Go test e2e/upgrade_test.go upgrades the daemon, and prints what it
// observed as one JSON line on standard output. It judges nothing itself.
//
//   node upgrade.mjs <snodod binary> <version> [relay]
//
// With "relay" it starts `snodod connect --relay`, which copies bytes to
// and from the session socket: the daemon then serves a socket, not the
// client's pipes.
//
// Protocol with the test: it prints "ready" once its traffic runs, waits
// for a line "upgraded" on standard input, goes on for a moment, then has
// the (new) daemon report a resource update and a tool list change, stops
// and prints the summary.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { createInterface } from 'node:readline';

import { closeAndWait, sleep, textOf, until } from './util.mjs';

const WATCHED = 'test://watched-resource';

const [binary, version, mode] = process.argv.slice(2);
const out = { version, echoes: 0, errors: [], initializes: 0, progress: 0 };
let stderr = '';
const args = mode === 'relay' ? ['connect', '--relay'] : ['connect'];
const transport = new StdioClientTransport({ command: binary, args, env: process.env, stderr: 'pipe' });
transport.stderr.on('data', (chunk) => { stderr += chunk; });
const send = transport.send.bind(transport);
transport.send = (message, options) => {
  if (message.method === 'initialize') {
    out.initializes++;
    message = { ...message, params: { ...message.params, protocolVersion: version } };
  }
  return send(message, options);
};
const updates = [];
let toolsChanged = 0;
const client = new Client({ name: 'snodod-e2e-ts-upgrade', version: '1' }, { capabilities: {} });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updates.push(n.params.uri); });
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { toolsChanged++; });
await client.connect(transport);
const child = transport._process;
await client.subscribeResource({ uri: WATCHED });

// A long call with progress, running across the upgrade.
const long = client.callTool({ name: 'sleep', arguments: { ms: 2000 } }, undefined, {
  onprogress: () => { out.progress++; },
}).then((r) => { out.sleep = textOf(r); }, (e) => { out.errors.push(`sleep: ${e?.code ?? ''} ${e?.message ?? e}`); });

// Pipelined calls: four workers, each a request at a time, checked.
let running = true;
const worker = async (w) => {
  for (let i = 0; running; i++) {
    const text = `ts ${w} ${i}`;
    try {
      const got = textOf(await client.callTool({ name: 'echo', arguments: { text } }));
      if (got !== text) out.errors.push(`echo ${text} = ${got}`);
      else out.echoes++;
    } catch (e) {
      out.errors.push(`echo ${text}: ${e?.code ?? ''} ${e?.message ?? e}`);
    }
    await sleep(20); // traffic, not a load test
  }
};
const workers = [0, 1, 2, 3].map(worker);
await until(() => out.echoes >= 20, 10000);
process.stdout.write('ready\n');

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line.trim() === 'upgraded') break;
}
const before = out.echoes;
await until(() => out.echoes >= before + 20, 10000);
try {
  await client.callTool({ name: 'test_trigger_resource_update', arguments: {} });
  await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
} catch (e) {
  out.errors.push(`trigger: ${e?.message ?? e}`);
}
out.updated = await until(() => updates.includes(WATCHED), 10000);
out.toolsChanged = await until(() => toolsChanged > 0, 10000);
running = false;
await Promise.all(workers);
await long;
await closeAndWait(client, child);
out.exitCode = child.exitCode;
out.stderr = stderr;
process.stdout.write(JSON.stringify(out) + '\n');
