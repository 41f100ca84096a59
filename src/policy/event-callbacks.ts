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
 * (cloud metadata), unspecified, multicast and reserved addresses never pass. An IPv6 address
 * that carries an IPv4 address is judged by the IPv4 address.
 */

/** Longer callbacks are refused (what a header or a log line can carry whole). */
const MAX_CALLBACK_CHARS = 2048

/**
 * IPv4 addresses no webhook is ever sent to, whatever the patterns say. The IPv4 address inside
 * an IPv6 transition form is judged by these same rules (`reachOf`).
 */
const NEVER = new BlockList()
NEVER.addSubnet('169.254.0.0', 16, 'ipv4') // link-local, cloud metadata (RFC 3927)
NEVER.addSubnet('0.0.0.0', 8, 'ipv4') // "this network" (RFC 791)
NEVER.addSubnet('224.0.0.0', 4, 'ipv4') // multicast
NEVER.addSubnet('240.0.0.0', 4, 'ipv4') // reserved, broadcast

/** IPv4 addresses inside a network (RFC 6890 special-purpose): only where a pattern names them. */
const INTERNAL = new BlockList()
INTERNAL.addSubnet('10.0.0.0', 8, 'ipv4')
INTERNAL.addSubnet('100.64.0.0', 10, 'ipv4') // shared address space (RFC 6598)
INTERNAL.addSubnet('127.0.0.0', 8, 'ipv4')
INTERNAL.addSubnet('172.16.0.0', 12, 'ipv4')
INTERNAL.addSubnet('192.0.0.0', 24, 'ipv4')
INTERNAL.addSubnet('192.168.0.0', 16, 'ipv4')
INTERNAL.addSubnet('198.18.0.0', 15, 'ipv4') // benchmarking

/*
 * The IPv6 lists hold IPv6 subnets only. Node's BlockList also matches an IPv4 address against an
 * IPv4-mapped subnet (`::ffff:0:0/96` there made every IPv4 address internal), and the transition
 * forms are judged by their IPv4 address instead (`embeddedV4`).
 */
const NEVER6 = new BlockList()
NEVER6.addAddress('::', 'ipv6') // unspecified
NEVER6.addSubnet('fe80::', 10, 'ipv6') // link-local (RFC 4291 §2.5.6)
NEVER6.addSubnet('ff00::', 8, 'ipv6') // multicast

/** Global unicast (RFC 4291 §2.4, IANA): no IPv6 address outside it reaches the public Internet. */
const GLOBAL6 = new BlockList()
GLOBAL6.addSubnet('2000::', 3, 'ipv6')

/** Special-purpose ranges inside global unicast that are no public destination (RFC 6890). */
const INTERNAL6 = new BlockList()
INTERNAL6.addSubnet('2001:2::', 48, 'ipv6') // benchmarking (RFC 5180)
INTERNAL6.addSubnet('2001:db8::', 32, 'ipv6') // documentation (RFC 3849)

/**
 * Names that resolve inside a network by convention (RFC 6761, RFC 6762, RFC 8375), and
 * `.localdomain`, the domain of `localhost.localdomain` in many hosts files (never delegated).
 */
const INTERNAL_SUFFIXES = [
  '.localhost',
  '.localdomain',
  '.local',
  '.internal',
  '.home.arpa',
] as const

/** What a callback host reaches: the public Internet, a network's inside, or never anywhere. */
type Reach = 'public' | 'internal' | 'never'

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
  const reach = reachOf(bareHost(url.hostname))
  // SECURITY: judged before the patterns: no pattern opens the metadata address, whatever form.
  if (reach === 'never')
    return 'link-local, unspecified, multicast and reserved addresses are never allowed'
  if (allowing.some((c) => c.literal === url.origin)) return undefined
  if (url.protocol === 'http:') return 'plain http is allowed only where a pattern names the origin'
  if (reach === 'internal')
    return 'an internal address is allowed only where a pattern names the origin'
  return undefined
}

/**
 * What a host reaches. An IPv4 address by the lists above. An IPv6 address that carries an IPv4
 * address (a transition form) by that IPv4 address, with the same rules: a translator or tunnel
 * on the way delivers to it (`https://[64:ff9b:1::a00:5]/` reaches 10.0.0.5 through a site's
 * NAT64). Any other IPv6 address is public only inside global unicast and outside its special
 * ranges. A name by convention (`internalName`); names are not resolved (docs/events.md).
 */
function reachOf(host: string): Reach {
  const family = isIP(host)
  if (family === 4) return reachOfV4(host)
  if (family === 0) return internalName(host) ? 'internal' : 'public'
  if (NEVER6.check(host, 'ipv6')) return 'never'
  const embedded = embeddedV4(host)
  if (embedded !== undefined) {
    const worst = embedded.addresses.map(reachOfV4).reduce(worse)
    return embedded.site ? worse(worst, 'internal') : worst
  }
  // SECURITY: outside global unicast is loopback, unique-local, site-local or reserved space.
  if (!GLOBAL6.check(host, 'ipv6') || INTERNAL6.check(host, 'ipv6')) return 'internal'
  return 'public'
}

function reachOfV4(address: string): Reach {
  if (NEVER.check(address, 'ipv4')) return 'never'
  return INTERNAL.check(address, 'ipv4') ? 'internal' : 'public'
}

function worse(a: Reach, b: Reach): Reach {
  if (a === 'never' || b === 'never') return 'never'
  return a === 'internal' || b === 'internal' ? 'internal' : 'public'
}

/**
 * The IPv4 addresses an IPv6 address carries, when it is a transition form; `site` when only a
 * site's own translator gives it a meaning. `host` is in the WHATWG serialisation the canonical
 * check ensured (lower-case hex pieces, at most one `::`, no dotted quad), which `words` reads.
 */
function embeddedV4(host: string): { addresses: string[]; site: boolean } | undefined {
  const w = words(host)
  const v4 = (hi: number, lo: number): string => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`
  const last = { addresses: [v4(w[6], w[7])], site: false }
  const zeros = (from: number, to: number): boolean => w.slice(from, to).every((x) => x === 0)
  // IPv4-compatible ::/96 (RFC 4291 §2.5.5.1; `::` and `::1` are not: unspecified, loopback).
  if (zeros(0, 6)) return host === '::1' ? undefined : last
  // IPv4-mapped ::ffff:0:0/96 (RFC 4291 §2.5.5.2), IPv4-translated ::ffff:0:0:0/96 (RFC 2765).
  if (zeros(0, 5) && w[5] === 0xffff) return last
  if (zeros(0, 4) && w[4] === 0xffff && w[5] === 0) return last
  // NAT64 well-known prefix 64:ff9b::/96 (RFC 6052 §2.1).
  if (w[0] === 0x64 && w[1] === 0xff9b && zeros(2, 6)) return last
  // NAT64 local-use 64:ff9b:1::/48 (RFC 8215): the site picks the prefix length inside it, so
  // the address is read as /96 (RFC 6052 §2.2) and is never better than internal.
  if (w[0] === 0x64 && w[1] === 0xff9b && w[2] === 1) return { ...last, site: true }
  // 6to4 2002::/16 (RFC 3056 §2): the IPv4 address in bits 16-47.
  if (w[0] === 0x2002) return { addresses: [v4(w[1], w[2])], site: false }
  // Teredo 2001::/32 (RFC 4380 §4): the server in bits 32-63, the client's address obfuscated
  // as the bitwise NOT of the last 32 bits.
  if (w[0] === 0x2001 && w[1] === 0) {
    return { addresses: [v4(w[2], w[3]), v4(~w[6] & 0xffff, ~w[7] & 0xffff)], site: false }
  }
  return undefined
}

/** The eight 16-bit pieces of a serialised IPv6 address (`::` expanded to zeros). */
function words(host: string): [number, number, number, number, number, number, number, number] {
  const [head = '', tail] = host.split('::')
  const piece = (part: string): number[] => (part === '' ? [] : part.split(':').map(hex))
  const left = piece(head)
  const right = tail === undefined ? [] : piece(tail)
  const all = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right]
  return all as [number, number, number, number, number, number, number, number]
}

function hex(piece: string): number {
  return Number.parseInt(piece, 16)
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

/**
 * `[::1]` → `::1`. Trailing dots are dropped, all of them: a resolver reads `localhost.` and
 * `localhost..` as `localhost` (RFC 1034 §3.1: the empty label is the root), and the WHATWG
 * parser keeps them in the canonical form.
 */
function bareHost(hostname: string): string {
  const h = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname
  return h.replace(/\.+$/, '')
}

/**
 * `localhost` in every spelling (the canonical form is lower-case, trailing dots are gone; names
 * under it, RFC 6761 §6.3), `localhost.localdomain` (the name many hosts files give loopback), a
 * single label (resolved by search domains), or a conventionally local suffix.
 */
function internalName(host: string): boolean {
  if (host === 'localhost' || !host.includes('.')) return true
  return INTERNAL_SUFFIXES.some((s) => host.endsWith(s))
}
