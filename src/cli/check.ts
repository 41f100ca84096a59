import type { GatewayConfig } from '../config/schema.js'
import { ConfigError, loadConfigFile, type LoadedConfig } from '../runtime/load.js'
import { problemsText } from './problems.js'

/** Where check writes. */
interface CheckIo {
  out(text: string): void
  err(text: string): void
}

/**
 * `mcp-edge check`: loads the config as `serve` would (its policy files and pinning lock
 * included) and prints one line of what it configures, or every problem with its place.
 */
export function checkCommand(file: string, io: CheckIo): number {
  try {
    io.out(`${file}: ok: ${configSummary(loadConfigFile(file))}\n`)
    return 0
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    io.err(problemsText(file, err))
    return 1
  }
}

const n = (count: number, one: string, many = `${one}s`): string =>
  `${count} ${count === 1 ? one : many}`

/**
 * What a config sets up, in one line: `2 servers (3 replicas), 1 virtual server; policies: 4
 * rules, 1 limit (enforce); cache in memory; …`. Parts the config leaves out are not named.
 */
export function configSummary(loaded: LoadedConfig): string {
  const c: GatewayConfig = loaded.config
  const servers = Object.values(c.servers)
  const replicas = servers.reduce((sum, s) => sum + s.upstreams.length, 0)
  const virtual = Object.keys(c.virtualServers).length
  const parts = [
    `${n(servers.length, 'server')} (${n(replicas, 'replica')})` +
      (virtual > 0 ? `, ${n(virtual, 'virtual server')}` : ''),
  ]
  const p = loaded.policy
  parts.push(
    p === undefined
      ? 'no policies (everything allowed)'
      : `policies: ${n(p.rules.length, 'rule')}, ${n(p.limits.length, 'limit')} (${p.mode})`,
  )
  if (c.auth !== undefined) parts.push('JWT auth')
  if (c.cache !== undefined)
    parts.push(c.cache.redis === undefined ? 'cache in memory' : 'cache in memory and Redis')
  if (c.rateLimits?.redis !== undefined) parts.push('rate limits in Redis')
  const checked = servers.filter((s) => s.healthCheck !== undefined).length
  if (checked > 0) parts.push(`health checks on ${n(checked, 'server')}`)
  if (c.pinning !== undefined)
    parts.push(`pinning (drift: ${c.pinning.onDrift}, new tools: ${c.pinning.newTools})`)
  if (c.telemetry !== undefined) parts.push('traces')
  if (c.workers !== 1) parts.push(`workers: ${c.workers}`)
  const listen = `listen ${c.listen.host}:${c.listen.port}`
  parts.push(c.admin === undefined ? listen : `${listen}, admin ${c.admin.host}:${c.admin.port}`)
  return parts.join('; ')
}
