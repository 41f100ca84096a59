import { isIP } from 'node:net'

/** `10.0.0.0/8`, `2001:db8::/32` or a single address; undefined when not one. */
export function parseCidr(
  text: string,
): { address: string; prefix: number; type: 'ipv4' | 'ipv6' } | undefined {
  const slash = text.indexOf('/')
  const address = slash === -1 ? text : text.slice(0, slash)
  const family = isIP(address)
  if (family === 0) return undefined
  const max = family === 4 ? 32 : 128
  const bits = slash === -1 ? String(max) : text.slice(slash + 1)
  if (!/^[0-9]{1,3}$/.test(bits) || Number(bits) > max) return undefined
  return { address, prefix: Number(bits), type: family === 4 ? 'ipv4' : 'ipv6' }
}
