import type { GatewayConfig } from '../config/schema.js'
import type { McpTarget } from '../mcp/classify.js'
import { lockOf, ownIdentity } from './config.js'
import { ServerCatalog } from './curate.js'

/** What `mcp-edge explain` says about a tool or prompt name's catalog view. */
interface CatalogExplanation {
  /** The backend's own name policy judges; undefined when clients cannot use the name. */
  readonly backend: string | undefined
  readonly lines: readonly string[]
  readonly json: Readonly<Record<string, unknown>>
}

/**
 * The client's name → the backend's (docs/catalog.md §Curation), and the pin the lock holds for
 * it. Whether the backend drifted since is known only at run time (/readyz), not here.
 */
export function explainCatalog(
  config: GatewayConfig,
  server: string,
  target: McpTarget,
): CatalogExplanation | undefined {
  const cfg = config.servers[server]
  if (cfg === undefined || (target.kind !== 'tool' && target.kind !== 'prompt')) return undefined
  const pinning = config.pinning
  const kind = target.kind === 'tool' ? 'tools' : 'prompts'
  if (Object.keys(cfg[kind]).length === 0 && pinning === undefined) return undefined
  const backend = new ServerCatalog(server, cfg, undefined, '', ownIdentity(config)).resolve(
    kind,
    target.name,
  )
  const q = JSON.stringify
  const lines: string[] = []
  if (backend === undefined) {
    lines.push(
      `catalog: ${target.kind} ${q(target.name)} is unknown to clients (hidden or renamed)`,
    )
    return { backend, lines, json: { exposed: target.name, backend: null, visible: false } }
  }
  lines.push(
    backend === target.name
      ? `catalog: ${target.kind} ${q(target.name)} is the backend's own name`
      : `catalog: ${target.kind} ${q(target.name)} is the backend's ${q(backend)}`,
  )
  const json: Record<string, unknown> = { exposed: target.name, backend, visible: true }
  if (pinning !== undefined) {
    const pin = lockOf(config)?.servers.get(server)?.[kind].get(backend)
    lines.push(
      pin === undefined
        ? `pin: not in the lock (newTools: ${pinning.newTools}${pinning.newTools === 'hide' ? ', unknown to clients' : ''})`
        : `pin: ${pin.digest} (onDrift: ${pinning.onDrift}; drift shows on /readyz)`,
    )
    json.pin = pin?.digest ?? null
    if (pin === undefined && pinning.newTools === 'hide') {
      json.visible = false
      return { backend: undefined, lines, json }
    }
  }
  return { backend, lines, json }
}
