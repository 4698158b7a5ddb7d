/**
 * What the server's settings read (`@ets/adapters-connectors/settings`): the parsers of the egress
 * and MCP settings, without the connectors themselves. Every `ets` command reads the settings, and
 * the package's index would load the MCP SDK, the egress and the connection pool with them (about
 * half a second at each command's start).
 */
export { parseCidr } from './egress/address-policy.js';
export { parseDnsServers } from './egress/resolver.js';
export { readStdioServersFile, type StdioServerSpec } from './mcp/stdio-servers.js';
