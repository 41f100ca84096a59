import { isRecord } from '../mcp/jsonrpc.js'

/**
 * MCP Apps (`io.modelcontextprotocol/ui`, SEP-1865, spec 2026-01-26 §Resource Discovery) through
 * a virtual server: a tool points at the `ui://` resource that renders it in `_meta.ui.resourceUri`
 * (or the deprecated flat `_meta["ui/resourceUri"]`), and the app, once rendered, calls its own
 * server's tools back by their names (§Standard MCP Messages: `tools/call`), the member's own
 * names, which a prefix may have changed (docs/virtual-servers.md §Skills and MCP Apps).
 */

/** What a member's tools/list says of its apps. */
export interface MemberApps {
  /** The `ui://` resources its tools point at. */
  readonly resources: ReadonlySet<string>
  /** Its tools an app may call (visibility includes `app`, the default), by its own names. */
  readonly callable: ReadonlySet<string>
}

const DEPRECATED_KEY = 'ui/resourceUri'

/** The `ui://` resource a tool points at, if any. */
function appResourceOf(tool: unknown): string | undefined {
  if (!isRecord(tool) || !isRecord(tool._meta)) return undefined
  const meta = tool._meta
  const ui = meta.ui
  const uri = isRecord(ui) ? ui.resourceUri : meta[DEPRECATED_KEY]
  return typeof uri === 'string' ? uri : undefined
}

/** Whether an app may call the tool: its visibility includes `app`, or is not given. */
function appCallable(tool: Readonly<Record<string, unknown>>): boolean {
  const ui = isRecord(tool._meta) ? tool._meta.ui : undefined
  const visibility = isRecord(ui) ? ui.visibility : undefined
  return !Array.isArray(visibility) || visibility.includes('app')
}

/** The apps of a tools/list page, added to `previous` (a later page of the same listing). */
export function appsOf(tools: unknown, previous?: MemberApps): MemberApps {
  const resources = new Set(previous?.resources)
  const callable = new Set(previous?.callable)
  if (Array.isArray(tools)) {
    for (const tool of tools as unknown[]) {
      if (!isRecord(tool) || typeof tool.name !== 'string') continue
      const uri = appResourceOf(tool)
      if (uri !== undefined) resources.add(uri)
      if (appCallable(tool)) callable.add(tool.name)
    }
  }
  return { resources, callable }
}

/**
 * A listed tool with the `ui://` resource it points at as clients see it (`expose`: the virtual
 * server's name of the member's URI); undefined when that resource is reachable under no name,
 * and then the tool is shown without it (text-only, as to a host without MCP Apps).
 */
export function withExposedApp(
  tool: Record<string, unknown>,
  expose: (uri: string) => string | undefined,
): Record<string, unknown> {
  const own = appResourceOf(tool)
  if (own === undefined) return tool
  const exposed = expose(own)
  if (exposed === own) return tool
  const meta = { ...(tool._meta as Record<string, unknown>) }
  if (isRecord(meta.ui)) {
    const ui: Record<string, unknown> = { ...meta.ui }
    if (exposed === undefined) delete ui.resourceUri
    else ui.resourceUri = exposed
    meta.ui = ui
  }
  if (typeof meta[DEPRECATED_KEY] === 'string') {
    if (exposed === undefined) delete meta[DEPRECATED_KEY]
    else meta[DEPRECATED_KEY] = exposed
  }
  return { ...tool, _meta: meta }
}
