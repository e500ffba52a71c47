// Drives `snodod stdio --demo` with the official TypeScript MCP client at
// each protocol version given, and prints one JSON summary of what it
// observed on standard output. The Go test e2e/node_test.go runs it and
// checks the summary; this script judges nothing itself.
//
//   node client.mjs <snodod binary> <version>...
//   node client.mjs --http <endpoint URL> <version>...
//
// With --http the client speaks Streamable HTTP to a running
// `snodod serve --http` (e2e/http_sdk_test.go) instead of starting
// `snodod stdio`.
// The SDK always proposes its newest version in initialize; a wrapper
// around the transport rewrites the proposal so that the server negotiates
// the version asked for.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

import { closeAndWait, sleep, textOf, until } from './util.mjs';

const WATCHED = 'test://watched-resource';

async function session(binary, version, url) {
  const out = { version, errors: {} };
  let stderr = '';
  let transport;
  if (url) {
    transport = new StreamableHTTPClientTransport(new URL(url));
  } else {
    transport = new StdioClientTransport({
      command: binary,
      args: ['stdio', '--demo'],
      stderr: 'pipe',
      env: { GORACE: 'exitcode=66' },
    });
    transport.stderr.on('data', (chunk) => { stderr += chunk; });
  }

  // Propose `version`, and keep every line sent and received.
  const sent = [];
  const received = [];
  const send = transport.send.bind(transport);
  transport.send = (message, options) => {
    if (message.method === 'initialize') {
      message = { ...message, params: { ...message.params, protocolVersion: version } };
    }
    sent.push(message);
    return send(message, options);
  };
  const setProtocolVersion = transport.setProtocolVersion?.bind(transport);
  transport.setProtocolVersion = (v) => { out.negotiated = v; setProtocolVersion?.(v); };

  const logs = [];
  const updates = [];
  let toolsChanged = 0;
  const client = new Client({ name: 'snodod-e2e-ts', version: '1' }, { capabilities: {} });
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params.data); });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updates.push(n.params.uri); });
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { toolsChanged++; });

  await client.connect(transport);
  const child = transport._process; // kept for its exit code
  const onmessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    received.push(message);
    onmessage?.(message, extra);
  };
  out.serverName = client.getServerVersion()?.name;

  // step runs one observation; an exception is recorded under its name.
  const step = async (name, f) => {
    try {
      await f();
    } catch (e) {
      out.errors[name] = `${e?.code ?? ''} ${e?.message ?? e}`.trim();
    }
  };

  await step('tools', async () => {
    out.tools = (await client.listTools()).tools.map((t) => t.name);
    out.echo = textOf(await client.callTool({ name: 'echo', arguments: { text: 'hello' } }));
    const image = (await client.callTool({ name: 'test_image_content', arguments: {} })).content[0];
    out.image = { type: image.type, mimeType: image.mimeType, data: image.data };
    out.failIsError = (await client.callTool({ name: 'fail', arguments: {} })).isError;
  });
  await step('resources', async () => {
    out.staticText = (await client.readResource({ uri: 'test://static-text' })).contents[0]?.text;
    out.template = (await client.readResource({ uri: 'test://template/7/data' })).contents[0]?.text;
  });
  await step('prompt', async () => {
    const p = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'a', arg2: 'b' } });
    out.prompt = p.messages.map((m) => m.content.text);
  });
  await step('completion', async () => {
    const c = await client.complete({
      ref: { type: 'ref/prompt', name: 'test_prompt_with_arguments' },
      argument: { name: 'arg1', value: 'pa' },
    });
    out.completion = c.completion.values;
  });
  await step('progress', async () => {
    const progress = [];
    const r = await client.callTool({ name: 'sleep', arguments: { ms: 350 } }, undefined, {
      onprogress: (p) => progress.push({ progress: p.progress, total: p.total }),
    });
    out.sleep = textOf(r);
    out.progress = progress; // received before callTool resolved
  });
  await step('cancel', async () => {
    const abort = new AbortController();
    const call = client.callTool({ name: 'sleep', arguments: { ms: 30000 } }, undefined, { signal: abort.signal });
    await until(() => sent.some((m) => m.params?.arguments?.ms === 30000));
    const id = sent.find((m) => m.params?.arguments?.ms === 30000).id;
    await sleep(100);
    const start = Date.now();
    abort.abort('e2e cancels the sleep');
    try {
      await call;
      out.cancelled = 'completed';
    } catch (e) {
      out.cancelled = `rejected: ${e?.message ?? e}`; // the SDK rejects with the abort reason
    }
    out.cancelledAfterMs = Date.now() - start;
    out.afterCancel = textOf(await client.callTool({ name: 'echo', arguments: { text: 'still here' } }));
    await sleep(200); // time for a stray line to arrive
    out.stray = received.filter((m) => m.id === id && !m.method);
  });
  await step('logging', async () => {
    await client.setLoggingLevel('info');
    await client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    out.logs = [...logs];
  });
  await step('subscribe', async () => {
    await client.subscribeResource({ uri: WATCHED });
    await client.callTool({ name: 'test_trigger_resource_update', arguments: {} });
    out.updated = await until(() => updates.includes(WATCHED));
    await client.unsubscribeResource({ uri: WATCHED });
  });
  await step('listChanged', async () => {
    await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    out.toolsChanged = await until(() => toolsChanged > 0);
  });
  await step('inputRequired', async () => {
    try {
      const r = await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} });
      // A tool's failure is a result: isError with the reason as text.
      out.inputRequired = { code: 0, message: r.isError ? `isError: ${textOf(r)}` : 'no error' };
    } catch (e) {
      out.inputRequired = { code: e.code, message: e.message };
    }
  });

  if (url) {
    await transport.terminateSession(); // DELETE
    await client.close();
    return out;
  }
  await closeAndWait(client, child);
  out.exitCode = child.exitCode;
  out.signal = child.signalCode;
  out.stderr = stderr;
  return out;
}

const args = process.argv.slice(2);
const url = args[0] === '--http' ? args[1] : undefined;
const [binary, ...versions] = url ? [undefined, ...args.slice(2)] : args;
const sessions = [];
for (const version of versions) {
  try {
    sessions.push(await session(binary, version, url));
  } catch (e) {
    sessions.push({ version, errors: { session: String(e?.stack ?? e) } });
  }
}
process.stdout.write(JSON.stringify({ sdk: 'typescript', sessions }) + '\n');
