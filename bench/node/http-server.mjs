// A peer server for snodod's HTTP benchmark (bench/cmd/httpbench): the demo
// tool echo on the official TypeScript MCP SDK, served over Streamable HTTP
// in stateless mode with JSON responses (a server and transport per
// request, as the SDK's documentation shows for stateless servers). The
// SDK pinned here speaks 2025-11-25 at newest, so the benchmark sends it
// session-less 2025-11-25 requests.
//
//   node http-server.mjs PORT
//
// It prints "listening 127.0.0.1:PORT" once it accepts.

import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

function newServer() {
  const server = new McpServer({ name: 'ts-sdk-http-peer', version: '1.0.0' });
  server.registerTool(
    'echo',
    {
      description: 'Returns its text argument unchanged, as one text content block.',
      inputSchema: { text: z.string().describe('The text to return.') },
    },
    async ({ text }) => ({ content: [{ type: 'text', text }] }),
  );
  return server;
}

const httpServer = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', async () => {
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => { transport.close(); server.close(); });
    try {
      await server.connect(transport);
      await transport.handleRequest(req, res, JSON.parse(body));
    } catch (e) {
      if (!res.headersSent) {
        res.writeHead(500).end(String(e));
      }
    }
  });
});
httpServer.keepAliveTimeout = 60_000;
httpServer.listen(Number(process.argv[2] ?? 0), '127.0.0.1', () => {
  console.log(`listening 127.0.0.1:${httpServer.address().port}`);
});
