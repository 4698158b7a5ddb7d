/**
 * The upstream MCP server of `ets demo`: a stdio server written with the official SDK, with one
 * tool, `transfer` ({amount, payee}), that only says what it would have done. The service starts it
 * as the stdio server `demo-bank` that `ets demo --setup` names in DIR/mcp-servers.json
 * (SVC_MCP_STDIO_SERVERS); it is run as `node dist/cli/demo-mcp-upstream.js`, never by the CLI.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const server = new Server({ name: 'demo-bank', version: '1.0.0' }, { capabilities: { tools: {} } });
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    {
      name: 'transfer',
      description: 'Transfers an amount in EUR to a payee (the demo only says it did)',
      inputSchema: {
        type: 'object',
        properties: { amount: { type: 'number', minimum: 0 }, payee: { type: 'string', maxLength: 100 } },
        required: ['amount', 'payee'],
        additionalProperties: false,
      },
    },
  ],
}));
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const { name, arguments: args = {} } = request.params;
  if (name !== 'transfer') return { content: [{ type: 'text', text: `unknown tool ${name}` }], isError: true };
  const { amount, payee } = args as { amount: number; payee: string };
  return { content: [{ type: 'text', text: `transferred ${amount} EUR to ${payee}` }], structuredContent: { transferred: amount, payee } };
});
await server.connect(new StdioServerTransport());
