import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Upstream } from './upstream.js'

const MAX_TOKEN = 1024
const MAC_BYTES = 16 // HMAC-SHA256 truncated to 128 bits (RFC 2104 §5 allows truncation to ≥ 80)
const B64URL = /^[A-Za-z0-9_-]+$/

let processKey: Buffer | undefined

/**
 * The key that signs session ids: `legacySessions.key`, or one random key per process (kept across
 * reloads, so ids survive them). Returns whether it was generated, so the caller can warn that
 * several gateway instances then cannot read each other's ids.
 */
export function sessionKey(configured: string | undefined): { key: Buffer; generated: boolean } {
  if (configured !== undefined) return { key: Buffer.from(configured, 'utf8'), generated: false }
  processKey ??= randomBytes(32)
  return { key: processKey, generated: true }
}

/** A session id the client presented, opened: who owns it and the backend's own id. */
export interface OpenedSession {
  readonly replica: Upstream
  readonly sessionId: string
}

/**
 * Legacy (2025-era) `Mcp-Session-Id` rewriting without shared state. The id handed to the client is
 * `<replica>.<upstream id>.<mac>`, each part base64url: `<replica>` is a keyed hash of the
 * replica's URL (stable across gateways and config order, and opaque: no address leaks), and the
 * HMAC binds server, replica and upstream id together, so a client can neither forge nor move a
 * session. Any gateway with the same key routes the session to its owner.
 */
export class SessionCodec {
  private readonly byTag = new Map<string, Upstream>()
  private readonly tagOf = new Map<Upstream, string>()

  constructor(
    private readonly key: Buffer,
    private readonly server: string,
    replicas: readonly Upstream[],
  ) {
    for (const r of replicas) {
      const tag = this.mac(`replica\0${r.url.href}`).subarray(0, 9).toString('base64url')
      this.byTag.set(tag, r)
      this.tagOf.set(r, tag)
    }
  }

  /** The id to hand the client for a session `replica` issued. */
  seal(replica: Upstream, sessionId: string): string {
    const tag = this.tagOf.get(replica) as string
    const sid = Buffer.from(sessionId, 'utf8').toString('base64url')
    return `${tag}.${sid}.${this.sign(tag, sid).toString('base64url')}`
  }

  /** The owner and original id, or undefined for anything unknown, malformed or tampered with. */
  open(token: string): OpenedSession | undefined {
    if (token.length > MAX_TOKEN) return undefined
    const parts = token.split('.')
    if (parts.length !== 3) return undefined
    const [tag, sid, mac] = parts as [string, string, string]
    if (!B64URL.test(tag) || !B64URL.test(sid) || !B64URL.test(mac)) return undefined
    const given = Buffer.from(mac, 'base64url')
    const expected = this.sign(tag, sid)
    // SECURITY: constant-time comparison; a MAC that does not verify reveals nothing.
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
    const replica = this.byTag.get(tag)
    if (replica === undefined) return undefined
    return { replica, sessionId: Buffer.from(sid, 'base64url').toString('utf8') }
  }

  private sign(tag: string, sid: string): Buffer {
    return this.mac(`session\0${this.server}\0${tag}\0${sid}`).subarray(0, MAC_BYTES)
  }

  private mac(data: string): Buffer {
    return createHmac('sha256', this.key).update(data).digest()
  }
}
