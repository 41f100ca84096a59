import { BlockList, isIP } from 'node:net'
import { parseCidr } from '../config/cidr.js'

/** Returns the client address of a connection, given its peer and its X-Forwarded-For. */
export type ClientAddress = (peer: string | undefined, forwardedFor: string | undefined) => string

/**
 * `key: ip`. The connection's peer address, unless that peer is a configured trusted proxy: then
 * X-Forwarded-For is read from the right (each proxy appends the address it saw, RFC 7239 §5.2
 * for the same rule on `Forwarded`), skipping trusted proxies, and the first other address is the
 * client. SECURITY: entries left of that one are the client's own text and never read; without
 * `trustedProxies` the header is ignored entirely, or anyone could claim a fresh address per request.
 */
export function clientAddress(trustedProxies: readonly string[]): ClientAddress {
  if (trustedProxies.length === 0) return (peer) => bare(peer ?? '')
  const trusted = new BlockList()
  for (const cidr of trustedProxies) {
    const c = parseCidr(cidr)
    if (c !== undefined) trusted.addSubnet(c.address, c.prefix, c.type)
  }
  const isTrusted = (a: string): boolean => {
    const family = isIP(a)
    return family !== 0 && trusted.check(a, family === 4 ? 'ipv4' : 'ipv6')
  }
  return (peer, forwardedFor) => {
    let client = bare(peer ?? '')
    if (!isTrusted(client) || forwardedFor === undefined) return client
    const hops = forwardedFor.split(',')
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = bare((hops[i] as string).trim())
      // A malformed entry is where trust ends: the hop that wrote it is the client.
      if (isIP(hop) === 0) return client
      client = hop
      if (!isTrusted(hop)) return hop
    }
    return client
  }
}

/** `::ffff:10.0.0.1` (an IPv4 peer on a dual-stack socket) counts as `10.0.0.1`. */
function bare(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address
}
