import { isIP } from 'node:net'

/** Whether an admin `host` only takes connections from this machine. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  if (isIP(bare) === 4) return bare.startsWith('127.')
  return bare === '::1'
}

/**
 * SECURITY: the admin listener shows rule names, tool names, replica addresses and who is denied;
 * on an address other machines reach, without `admin.token`, anyone who can connect reads it
 * (docs/operations.md §Status page). A warning at start and on the page and /readyz (admin).
 */
export function exposureWarnings(admin: {
  readonly host: string
  readonly token?: string | undefined
}): string[] {
  if (admin.token !== undefined || isLoopback(admin.host)) return []
  return [
    `admin: listening on ${admin.host} without admin.token; anyone who can reach it reads the status page, status.json and /readyz (set admin.token)`,
  ]
}
