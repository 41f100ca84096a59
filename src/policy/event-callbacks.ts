import { BlockList, isIP } from 'node:net'
import { GatewayError } from '../errors.js'
import { isRecord, type JsonRpcMessage } from '../mcp/jsonrpc.js'
import { compilePattern, type Matcher } from '../match/pattern.js'

/**
 * Where a backend may be told to POST events (`events/subscribe`, SEP-3415 webhook delivery). The
 * callback URL is the client's and is forwarded byte for byte, but the backend, not the client,
 * sends the POSTs: a callback naming an internal address makes the backend a request forger
 * inside its own network (docs/events.md "Webhooks"). So a server's `events.callbacks` patterns
 * must allow the URL, which must be written in its canonical form; plain http, loopback, private
 * and other internal addresses pass only where a pattern names that origin literally; link-local
 * (cloud metadata), unspecified and multicast addresses never pass.
 */

/** Longer callbacks are refused (what a header or a log line can carry whole). */
const MAX_CALLBACK_CHARS = 2048

/** Addresses no webhook is ever sent to, whatever the patterns say. */
const NEVER = new BlockList()
NEVER.addSubnet('169.254.0.0', 16, 'ipv4') // link-local, cloud metadata (RFC 3927)
NEVER.addSubnet('0.0.0.0', 8, 'ipv4') // "this network" (RFC 791)
NEVER.addSubnet('224.0.0.0', 4, 'ipv4') // multicast
NEVER.addSubnet('240.0.0.0', 4, 'ipv4') // reserved, broadcast
NEVER.addSubnet('fe80::', 10, 'ipv6') // link-local (RFC 4291)
NEVER.addAddress('::', 'ipv6') // unspecified
NEVER.addSubnet('ff00::', 8, 'ipv6') // multicast

/** Addresses inside a network (RFC 6890 special-purpose): only where a pattern names them. */
const INTERNAL = new BlockList()
INTERNAL.addSubnet('10.0.0.0', 8, 'ipv4')
INTERNAL.addSubnet('100.64.0.0', 10, 'ipv4') // shared address space (RFC 6598)
INTERNAL.addSubnet('127.0.0.0', 8, 'ipv4')
INTERNAL.addSubnet('172.16.0.0', 12, 'ipv4')
INTERNAL.addSubnet('192.0.0.0', 24, 'ipv4')
INTERNAL.addSubnet('192.168.0.0', 16, 'ipv4')
INTERNAL.addSubnet('198.18.0.0', 15, 'ipv4') // benchmarking
INTERNAL.addAddress('::1', 'ipv6')
INTERNAL.addSubnet('fc00::', 7, 'ipv6') // unique local (RFC 4193)
INTERNAL.addSubnet('::ffff:0:0', 96, 'ipv6') // IPv4-mapped: the IPv4 address is not read
INTERNAL.addSubnet('64:ff9b::', 96, 'ipv6') // NAT64 (RFC 6052)
INTERNAL.addSubnet('2001:db8::', 32, 'ipv6') // documentation

/** Names that resolve inside a network by convention (RFC 6761, RFC 6762, RFC 8375). */
const INTERNAL_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa'] as const

/** Compiled `events.callbacks` per server config (the array is replaced whenever the config is). */
const compiled = new WeakMap<readonly string[], readonly CallbackPattern[]>()

/**
 * Refuses an `events/subscribe` whose webhook callback the server's `events.callbacks` does not
 * allow (-32602, nothing forwarded). Undefined or empty patterns refuse every callback.
 */
export function refuseCallback(
  patterns: readonly string[] | undefined,
  message: JsonRpcMessage | undefined,
): void {
  const params = message?.params
  // SECURITY: a backend whose JSON reader matches keys by case (Go's encoding/json) or stops at NUL
  // would POST to `Delivery.URL` where the check read `delivery.url` (docs/policy.md §What is
  // refused before any decision).
  refuseVariants(params, 'delivery')
  const delivery = params?.delivery
  // Without a delivery there is nothing to POST to; the backend answers what it makes of that.
  if (delivery === undefined) return
  if (isRecord(delivery)) refuseVariants(delivery, 'url')
  const url = isRecord(delivery) ? delivery.url : undefined
  if (typeof url !== 'string')
    throw new GatewayError(
      'invalid_params',
      'events/subscribe needs params.delivery.url as a string',
    )
  const problem = callbackProblem(url, patterns ?? [])
  // SECURITY: a backend is never told to POST where the operator has not allowed (SSRF).
  if (problem !== undefined)
    throw new GatewayError('invalid_params', `the event callback is refused: ${problem}`)
}

/** Why a callback URL is refused, or undefined when `patterns` allow it. */
export function callbackProblem(raw: string, patterns: readonly string[]): string | undefined {
  if (patterns.length === 0) return 'this server allows no event callbacks (events.callbacks)'
  if (raw.length > MAX_CALLBACK_CHARS) return `longer than ${MAX_CALLBACK_CHARS} characters`
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return 'not a URL'
  }
  // SECURITY: only the canonical form (WHATWG URL serialisation), so the text the patterns matched
  // is the URL every parser reads: no `http://2130706433/`, `HTTPS://`, backslashes or dot segments.
  if (url.href !== raw) return `not in canonical form (${JSON.stringify(url.href)})`
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'not an http(s) URL'
  if (url.username !== '' || url.password !== '') return 'carries credentials'
  const path = url.href.slice(url.origin.length)
  const allowing = compiledOf(patterns).filter((c) => c.origin(url.origin) && c.path(path))
  if (allowing.length === 0) return 'no events.callbacks pattern allows it'
  const host = bareHost(url.hostname)
  const family = isIP(host)
  const type = family === 6 ? 'ipv6' : 'ipv4'
  if (family !== 0 && NEVER.check(host, type))
    return 'link-local, unspecified and multicast addresses are never allowed'
  if (allowing.some((c) => c.literal === url.origin)) return undefined
  if (url.protocol === 'http:') return 'plain http is allowed only where a pattern names the origin'
  if (family !== 0 ? INTERNAL.check(host, type) : internalName(host))
    return 'an internal address is allowed only where a pattern names the origin'
  return undefined
}

/** Refuses a key of `object` that is not `key` but reads as it to a case-folding or C reader. */
function refuseVariants(object: Readonly<Record<string, unknown>> | undefined, key: string): void {
  if (object === undefined) return
  for (const k of Object.keys(object)) {
    if (k !== key && readsAs(k) === key)
      throw new GatewayError('case_variant_key', `key ${JSON.stringify(k)} reads as "${key}"`)
  }
}

/** A key as a reader that folds case like Go's encoding/json, or stops at NUL, reads it. */
function readsAs(k: string): string {
  const cut = k.indexOf('\u0000')
  return (cut === -1 ? k : k.slice(0, cut))
    .replace(/\u017f/g, 's')
    .replace(/\u212a/g, 'k')
    .replace(/[\u0130\u0131]/g, 'i')
    .replace(/[A-Z]/g, (c) => c.toLowerCase())
}

/**
 * One `events.callbacks` pattern: its origin part (scheme, host, port) and its path part are
 * matched apart, so a `*` in the host never reaches into the path (`https://*.example.com/*` does
 * not allow `https://evil.test/.example.com/`). Without a path part every path is allowed.
 */
interface CallbackPattern {
  readonly origin: Matcher
  readonly path: Matcher
  /** The origin when the pattern names it without `*`: plain http and internal hosts need one. */
  readonly literal: string | undefined
}

function compiledOf(patterns: readonly string[]): readonly CallbackPattern[] {
  let c = compiled.get(patterns)
  if (c === undefined) {
    c = patterns.map((p) => {
      const scheme = p.indexOf('://')
      const slash = scheme === -1 ? -1 : p.indexOf('/', scheme + 3)
      const origin = slash === -1 ? p : p.slice(0, slash)
      return {
        origin: compilePattern(origin),
        path: compilePattern(slash === -1 ? '*' : p.slice(slash)),
        literal: origin.includes('*') ? undefined : origin,
      }
    })
    compiled.set(patterns, c)
  }
  return c
}

/** `[::1]` → `::1`; a trailing dot (`localhost.`) names the same host. */
function bareHost(hostname: string): string {
  const h = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname
  return h.endsWith('.') ? h.slice(0, -1) : h
}

/** `localhost`, a single label (resolved by search domains), or a conventionally local suffix. */
function internalName(host: string): boolean {
  if (host === 'localhost' || !host.includes('.')) return true
  return INTERNAL_SUFFIXES.some((s) => host.endsWith(s))
}
