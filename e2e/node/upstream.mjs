// Drives a hosted server through `snodod connect NAME` (the running daemon
// found through this process's environment) with the official TypeScript
// MCP client, answering the server's sampling and elicitation requests,
// and prints one JSON summary of what it observed. The Go test
// e2e/upstream_npm_test.go runs it against server-everything and checks
// the summary; this script judges nothing itself.
//
//   node upstream.mjs <snodod binary> <name>
//   node upstream.mjs --http <url>     (the same over Streamable HTTP, e.g.
//                                       http://127.0.0.1:PORT/mcp/everything)

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [first, second] = process.argv.slice(2);
const transport = first === '--http'
  ? new StreamableHTTPClientTransport(new URL(second))
  : new StdioClientTransport({ command: first, args: ['connect', second], env: process.env, stderr: 'inherit' });
const client = new Client({ name: 'e2e-ts', version: '1' }, { capabilities: { sampling: {}, elicitation: {} } });
client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  role: 'assistant', model: 'e2e-ts-model', content: { type: 'text', text: 'sampled by the TypeScript client' },
}));
// server-everything's form has enums a generic filler cannot know: the
// answer declines, which the server reports as such.
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'decline' }));

const text = (r) => (r.content ?? []).map((c) => c.text ?? '').join('') + (r.structuredContent ? JSON.stringify(r.structuredContent) : '');
const out = { progress: 0 };
await client.connect(transport);
out.server = client.getServerVersion()?.name;
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.echo = text(await client.callTool({ name: 'echo', arguments: { message: 'from TypeScript' } }));
out.sampling = text(await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hi', maxTokens: 10 } }));
out.elicitation = text(await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }));
await client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 2 } }, undefined, {
  onprogress: () => { out.progress++; },
});
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
