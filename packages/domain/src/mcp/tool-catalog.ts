/**
 * Which upstream tools the gateway offers. An upstream's `tools/list` is data from outside, so a
 * tool is offered only when everything about it holds:
 * - its name is a proper MCP tool name, and no other tool of the listing has the same name (a
 *   listing that names a tool twice cannot say which one a call reaches: neither is offered);
 * - the registration's `tools` allows it;
 * - its name maps to a valid capability (names.ts), and to one no other offered tool of the server
 *   maps to (`get_user` and `Get-User` would be decided, granted and recorded as one action:
 *   neither is offered);
 * - its input schema compiles (input-schema.ts).
 * What is dropped, and why, is logged once per listing.
 */
import { mayRequestCapability, type Caller } from '../identity/caller.js';
import type { Logger } from '../ports/logger.js';
import type { InputSchemas } from './input-schema.js';
import { gatewayToolName, MCP_TOOL_NAME, toolCapability } from './names.js';
import type { McpServerStore, McpUpstreams, UpstreamTool } from './ports.js';
import { registrationAllows, type McpServerRegistration } from './registration.js';

/** A tool the gateway offers. */
export interface OfferedTool {
  server: string;
  /** The upstream's name of the tool. */
  name: string;
  /** `<server>__<tool>`. */
  gatewayName: string;
  /** The action a call is decided as (`mcp-<server>:<verb>`). */
  capability: string;
  description?: string;
  inputSchema: Record<string, unknown>;
}

export interface DroppedTool {
  name: string;
  why: string;
}

/** The offered tools of one listing, and what was dropped from it. Pure. */
export function offeredTools(
  registration: McpServerRegistration,
  listed: readonly UpstreamTool[],
  schemas: Pick<InputSchemas, 'problem'>,
): { offered: OfferedTool[]; dropped: DroppedTool[] } {
  const dropped: DroppedTool[] = [];
  const count = new Map<string, number>();
  for (const t of listed) count.set(t.name, (count.get(t.name) ?? 0) + 1);
  const candidates: OfferedTool[] = [];
  for (const t of listed) {
    const name = String(t.name);
    if (!MCP_TOOL_NAME.test(name)) {
      dropped.push({ name: name.slice(0, 200), why: 'not a tool name MCP allows' });
      continue;
    }
    if (count.get(name)! > 1) {
      dropped.push({ name, why: 'listed more than once' });
      continue;
    }
    if (!registrationAllows(registration, name)) continue; // not offered by choice: not a problem
    const capability = toolCapability(registration.name, name);
    if (!capability) {
      dropped.push({ name, why: 'its name does not map to a valid capability' });
      continue;
    }
    const problem = schemas.problem(t.inputSchema);
    if (problem) {
      dropped.push({ name, why: `its input schema cannot be used: ${problem}` });
      continue;
    }
    candidates.push({
      server: registration.name,
      name,
      gatewayName: gatewayToolName(registration.name, name),
      capability,
      ...(typeof t.description === 'string' ? { description: t.description } : {}),
      inputSchema: t.inputSchema,
    });
  }
  const byCapability = new Map<string, number>();
  for (const t of candidates) byCapability.set(t.capability, (byCapability.get(t.capability) ?? 0) + 1);
  const offered: OfferedTool[] = [];
  for (const t of candidates) {
    if (byCapability.get(t.capability)! > 1) dropped.push({ name: t.name, why: `another tool of the server maps to the same capability '${t.capability}'` });
    else offered.push(t);
  }
  return { offered, dropped };
}

/** Active registrations read per listing: more than this many servers are not offered. */
const SERVERS_MAX = 1000;
const PAGE = 100;

export interface McpToolCatalogDeps {
  servers: Pick<McpServerStore, 'active' | 'listActive'>;
  upstreams: McpUpstreams;
  schemas: Pick<InputSchemas, 'problem'>;
  logger: Logger;
}

/** The tools of the active servers, as the gateway offers them (each upstream listing filtered once). */
export class McpToolCatalog {
  private readonly filtered = new WeakMap<readonly UpstreamTool[], { registrationId: string; offered: OfferedTool[] }>();

  constructor(private readonly deps: McpToolCatalogDeps) {}

  /** Every active server (and the upstream adapter closes the sessions of any other). */
  async activeServers(): Promise<McpServerRegistration[]> {
    const all: McpServerRegistration[] = [];
    for (let page = 1; all.length < SERVERS_MAX; page++) {
      const { items, total } = await this.deps.servers.listActive(page, PAGE);
      all.push(...items);
      if (items.length < PAGE || all.length >= total) break;
    }
    this.deps.upstreams.retain(all);
    return all;
  }

  /** The tools offered of one server; none while its listing fails. */
  async toolsOf(registration: McpServerRegistration): Promise<OfferedTool[]> {
    const listing = await this.deps.upstreams.listTools(registration);
    if (!listing.ok) return [];
    const known = this.filtered.get(listing.tools);
    if (known && known.registrationId === registration.registrationId) return known.offered;
    const { offered, dropped } = offeredTools(registration, listing.tools, this.deps.schemas);
    if (dropped.length > 0) this.deps.logger.warn({ mcpServer: registration.name, dropped }, 'MCP server: tools not offered');
    this.filtered.set(listing.tools, { registrationId: registration.registrationId, offered });
    return offered;
  }

  /** What `tools/list` shows a caller: the offered tools of every active server its key may call. */
  async toolsFor(caller: Caller): Promise<OfferedTool[]> {
    const servers = await this.activeServers();
    // In parallel: a server whose listing hangs holds up no other (each is bounded by its timeout).
    const lists = await Promise.all(servers.map((s) => this.toolsOf(s)));
    return lists.flat().filter((t) => mayRequestCapability(caller, t.capability));
  }

  /** The active registration and offered tool of a gateway tool, if there is one. */
  async find(server: string, tool: string): Promise<{ registration: McpServerRegistration; tool: OfferedTool } | undefined> {
    const registration = await this.deps.servers.active(server);
    if (!registration) return undefined;
    const found = (await this.toolsOf(registration)).find((t) => t.name === tool);
    return found && { registration, tool: found };
  }

  /** The offered tool of a registration that an action names (offered capabilities are unique per server). */
  async byAction(registration: McpServerRegistration, action: string): Promise<OfferedTool | undefined> {
    return (await this.toolsOf(registration)).find((t) => t.capability === action);
  }
}
