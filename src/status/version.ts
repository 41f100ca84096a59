import { readFileSync } from 'node:fs'

/**
 * The gateway's version, from its package.json (two folders up from src/status/ and from
 * dist/status/ alike; the container image keeps package.json beside dist/).
 */
export function gatewayVersion(): string {
  try {
    const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8')
    const version = (JSON.parse(text) as { version?: unknown }).version
    return typeof version === 'string' ? version : 'unknown'
  } catch {
    return 'unknown'
  }
}
