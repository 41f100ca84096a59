import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto'

/** Where each member still has pages: [member index, the member's own cursor]. */
export type PendingPages = readonly (readonly [number, string])[]

const TAG_BYTES = 16
/** A cursor longer than this is refused before any crypto runs. */
const MAX_CURSOR = 8192

/**
 * The opaque cursor of a merged list (spec 2026-07-28 server/utilities/pagination: cursors are
 * opaque to the client). It says which members still have pages and with which of their cursors,
 * and is bound to one virtual server and one list method, so it cannot be replayed elsewhere.
 * HMAC-SHA256 with a sub-key of the handle key (upstream/sessions.ts sessionKey; RFC 5869 §3.2):
 * an altered or forged cursor does not open, and is answered -32602 (pagination §Error Handling).
 */
export class CursorCodec {
  private readonly key: Buffer

  constructor(secret: Buffer) {
    this.key = Buffer.from(hkdfSync('sha256', secret, 'mcp-edge', 'virtual-cursor', 32))
  }

  seal(server: string, method: string, pending: PendingPages): string {
    const body = Buffer.from(JSON.stringify(pending), 'utf8').toString('base64url')
    return `${body}.${this.tag(server, method, body)}`
  }

  /** The pending pages, or undefined for anything this gateway did not issue for this list. */
  open(server: string, method: string, cursor: string): PendingPages | undefined {
    if (cursor.length > MAX_CURSOR) return undefined
    const dot = cursor.indexOf('.')
    if (dot <= 0) return undefined
    const body = cursor.slice(0, dot)
    // Compared as written, not decoded: base64url decoding ignores a last character's spare bits,
    // so several spellings decode to one tag; only the one this gateway wrote opens.
    const tag = Buffer.from(cursor.slice(dot + 1), 'latin1')
    const want = Buffer.from(this.tag(server, method, body), 'latin1')
    // SECURITY: constant-time comparison; only a cursor this key signed for this list opens.
    if (tag.length !== want.length || !timingSafeEqual(tag, want)) return undefined
    let value: unknown
    try {
      value = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'))
    } catch {
      return undefined
    }
    return isPending(value) ? value : undefined
  }

  private tag(server: string, method: string, body: string): string {
    // Lengths first: `a` + `bc` and `ab` + `c` sign differently.
    const text = `${server.length}:${server}${method.length}:${method}${body}`
    return createHmac('sha256', this.key)
      .update(text)
      .digest()
      .subarray(0, TAG_BYTES)
      .toString('base64url')
  }
}

function isPending(v: unknown): v is PendingPages {
  return (
    Array.isArray(v) &&
    v.every(
      (p) =>
        Array.isArray(p) &&
        p.length === 2 &&
        Number.isInteger(p[0]) &&
        (p[0] as number) >= 0 &&
        typeof p[1] === 'string',
    )
  )
}
