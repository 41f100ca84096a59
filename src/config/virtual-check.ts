import type { GatewayConfig } from './schema.js'

/**
 * What the schema cannot see about `virtualServers:` (docs/virtual-servers.md §Configuration): every
 * member is a server, once; a virtual server is not named like a server (both would be served at
 * /mcp/<name>); `resources:` routes only to members. Names that collide under `prefix: never` can
 * only be known once the members answer: they are reported at run time (docs/virtual-servers.md
 * §Names), never silently shadowed.
 */
export function checkVirtualServers(c: GatewayConfig): string[] {
  const problems: string[] = []
  for (const [name, v] of Object.entries(c.virtualServers)) {
    const at = `virtualServers.${name}`
    if (Object.hasOwn(c.servers, name)) {
      problems.push(`${at}: a server is already named ${name} (both would be /mcp/${name})`)
    }
    const seen = new Set<string>()
    for (const m of v.members) {
      if (!Object.hasOwn(c.servers, m)) problems.push(`${at}.members: unknown server ${m}`)
      if (seen.has(m)) problems.push(`${at}.members: ${m} is listed twice`)
      seen.add(m)
    }
    for (const [pattern, m] of Object.entries(v.resources)) {
      if (!seen.has(m)) problems.push(`${at}.resources.${pattern}: ${m} is not a member`)
    }
  }
  return problems
}
