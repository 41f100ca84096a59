import { isIP } from 'node:net'

/** Failed attempts one source may make in a window; the next is refused unread until one ages out. */
export const MAX_FAILURES = 20
const FAILURE_WINDOW_MS = 60_000
/** Sources remembered at once; past that the one that failed longest ago is forgotten. */
const MAX_SOURCES = 4096

/**
 * Failed admin-token attempts per source (docs/security.md §The admin listener): a source is the
 * TCP peer of the connection, never a forwarding header (a client would name itself a fresh
 * source per request), as an IPv4 address or an IPv6 /64 (one host gets a whole /64). A source's
 * failures hold back that source only, so no one can lock the operator out from elsewhere. The
 * table is bounded: each source keeps at most MAX_FAILURES times, and a full table forgets the
 * source that failed longest ago rather than refusing sources it has not seen.
 */
export class FailureThrottle {
  /** source -> times of its failures in the window, oldest first. Insertion order: last failure. */
  private readonly failures = new Map<string, number[]>()

  constructor(private readonly now: () => number = Date.now) {}

  /** Seconds until `peer` may try again; 0 when it may now. */
  wait(peer: string | undefined): number {
    const times = this.recent(sourceOf(peer), this.now())
    if (times === undefined || times.length < MAX_FAILURES) return 0
    const oldest = times[0] ?? 0
    return Math.max(1, Math.ceil((oldest + FAILURE_WINDOW_MS - this.now()) / 1000))
  }

  /** Notes a failed attempt from `peer`. */
  fail(peer: string | undefined): void {
    const source = sourceOf(peer)
    const now = this.now()
    const times = this.recent(source, now) ?? []
    this.failures.delete(source)
    if (this.failures.size >= MAX_SOURCES) {
      const oldest = this.failures.keys().next()
      if (oldest.done !== true) this.failures.delete(oldest.value)
    }
    times.push(now)
    if (times.length > MAX_FAILURES) times.shift()
    this.failures.set(source, times)
  }

  get sources(): number {
    return this.failures.size
  }

  /** The source's failures still in the window (dropping the rest), or undefined for none. */
  private recent(source: string, now: number): number[] | undefined {
    const times = this.failures.get(source)
    if (times === undefined) return undefined
    while (times.length > 0 && now - (times[0] ?? 0) >= FAILURE_WINDOW_MS) times.shift()
    if (times.length > 0) return times
    this.failures.delete(source)
    return undefined
  }
}

/**
 * The source a peer address counts as: IPv4 as is (an IPv4-mapped IPv6 address included), IPv6 by
 * its first 64 bits (RFC 4291 §2.5.4: the rest is the interface id a host picks freely).
 */
export function sourceOf(peer: string | undefined): string {
  if (peer === undefined) return 'unknown'
  const bare = peer.toLowerCase().replace(/%.*$/, '')
  if (bare.startsWith('::ffff:') && isIP(bare.slice(7)) === 4) return bare.slice(7)
  if (isIP(bare) !== 6) return bare
  const [head = '', tail = ''] = bare.split('::')
  const groups = (part: string): string[] => (part === '' ? [] : part.split(':'))
  const left = groups(head)
  const right = groups(tail)
  // An embedded IPv4 tail (`::1.2.3.4`) is two groups; the /64 is before it either way.
  const count = (gs: string[]): number => gs.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0)
  const full = bare.includes('::')
    ? [...left, ...Array<string>(8 - count(left) - count(right)).fill('0'), ...right]
    : left
  return `${full
    .slice(0, 4)
    .map((g) => g.padStart(4, '0'))
    .join(':')}::/64`
}
