// Drives `snodod stdio --demo` under a tool budget (its configuration is
// the caller's: XDG_CONFIG_HOME) with the official TypeScript MCP client,
// and prints one JSON summary of what it observed on standard output. The
// Go test e2e/budget_test.go runs it and checks the summary; this script
// judges nothing itself.
//
//   node budget.mjs <snodod binary>

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { closeAndWait, textOf } from './util.mjs';

const out = { errors: {} };
const step = async (name, f) => {
  try {
    await f();
  } catch (e) {
    out.errors[name] = String(e?.message ?? e);
  }
};

const transport = new StdioClientTransport({
  command: process.argv[2],
  args: ['stdio', '--demo'],
  stderr: 'pipe',
  env: { ...process.env },
});
let stderr = '';
const client = new Client({ name: 'budget-e2e', version: '1' });
await client.connect(transport);
transport.stderr?.on('data', (b) => { stderr += b; });
out.negotiated = transport._protocolVersion ?? null;

await step('list', async () => {
  const names = [];
  let cursor;
  do {
    const r = await client.listTools(cursor ? { cursor } : {});
    names.push(...r.tools.map((t) => t.name));
    cursor = r.nextCursor;
  } while (cursor);
  out.listed = names;
});

await step('search', async () => {
  const r = await client.callTool({ name: 'search_tools', arguments: { query: 'read the entire knowledge graph', limit: 3 } });
  out.found = JSON.parse(textOf(r)).tools.map((t) => t.name);
});

await step('call', async () => {
  const r = await client.callTool({ name: 'call_tool', arguments: { name: 'memory__read_graph' } });
  out.graph = textOf(r);
});

await step('progress', async () => {
  let reports = 0;
  const r = await client.callTool(
    { name: 'call_tool', arguments: { name: 'test_tool_with_progress' } },
    undefined,
    { onprogress: () => { reports++; } },
  );
  out.progressed = !r.isError;
  out.progress = reports;
});

await step('cancel', async () => {
  const ac = new AbortController();
  let started;
  const first = new Promise((resolve) => { started = resolve; });
  const call = client.callTool(
    { name: 'call_tool', arguments: { name: 'sleep', arguments: { ms: 60000 } } },
    undefined,
    { signal: ac.signal, onprogress: () => started() },
  );
  await first;
  ac.abort('changed my mind');
  try {
    await call;
    out.cancelled = 'answered';
  } catch (e) {
    // The SDK rejects an aborted request with the abort's reason.
    out.cancelled = String(e?.message ?? e).includes('changed my mind') ? 'aborted' : String(e);
  }
  // The session goes on after the cancel.
  out.after = textOf(await client.callTool({ name: 'echo', arguments: { text: 'still here' } }));
});

await closeAndWait(client, transport._process);
out.stderr = stderr;
process.stdout.write(JSON.stringify(out) + '\n');
