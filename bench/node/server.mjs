// A peer server for snodod's benchmark (bench/cmd/mcpbench): the demo tools
// of `snodod stdio --demo` (echo, sleep, big) on the official TypeScript MCP
// SDK, served over stdio exactly as the SDK's documentation shows.
//
//   node server.mjs
//
// It exits when standard input ends.

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const MAX_SLEEP_MS = 3_600_000;
const MAX_BIG_BYTES = 64 << 20;

const text = (t) => ({ content: [{ type: 'text', text: t }] });

const server = new McpServer({ name: 'ts-sdk-peer', version: '1.0.0' });

server.registerTool(
  'echo',
  {
    description: 'Returns its text argument unchanged, as one text content block.',
    inputSchema: { text: z.string().describe('The text to return.') },
  },
  async ({ text: t }) => text(t),
);

server.registerTool(
  'sleep',
  {
    description: 'Sleeps for ms milliseconds, then returns "done". Honours cancellation.',
    inputSchema: { ms: z.number().int().min(0).max(MAX_SLEEP_MS).describe('How long to sleep, in milliseconds.') },
  },
  async ({ ms }, extra) => {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      extra.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(extra.signal.reason ?? new Error('cancelled'));
      }, { once: true });
    });
    return text('done');
  },
);

server.registerTool(
  'big',
  {
    description: 'Returns one text content block of exactly the requested number of bytes (at most 64 MiB).',
    inputSchema: { bytes: z.number().int().min(0).max(MAX_BIG_BYTES).describe('The length of the text, in bytes.') },
  },
  async ({ bytes }) => text('x'.repeat(bytes)),
);

await server.connect(new StdioServerTransport());
// The SDK's transport keeps the process alive after standard input ends;
// end it then, as the other servers do.
process.stdin.on('end', () => setImmediate(() => process.exit(0)));
