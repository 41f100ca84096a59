import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto'
import type { Upstream } from './upstream.js'

/** Longest id a client may present; anything longer is refused before any crypto runs. */
const MAX_TOKEN = 1024
/** Longest backend session or task id the gateway seals (its sealed form stays under MAX_TOKEN). */
const MAX_UPSTREAM_ID = 512
const NONCE_BYTES = 12 // AES-GCM's native nonce size (NIST SP 800-38D §8.2.2: random 96-bit IVs)
const TAG_BYTES = 16
const B64URL = /^[A-Za-z0-9_-]+$/

let processKey: Buffer | undefined

/**
 * Sets the per-process key before first use: the workers of one `mcp-edge serve` share the key
 * their primary drew, so an id one worker sealed opens in any other (docs/operations.md §Workers).
 */
export function shareProcessKey(key: Buffer): void {
  processKey = key
}

/**
 * The key that seals session and task ids: `legacySessions.key`, or one random key per process
 * (kept across reloads, so ids survive them). Returns whether it was generated, so the caller can
 * warn that several gateway instances then cannot read each other's ids.
 */
export function sessionKey(configured: string | undefined): { key: Buffer; generated: boolean } {
  if (configured !== undefined) return { key: Buffer.from(configured, 'utf8'), generated: false }
  processKey ??= randomBytes(32)
  return { key: processKey, generated: true }
}

/** Who a handle belongs to: the verified token's issuer and subject; undefined without auth. */
export interface HandleOwner {
  readonly issuer: string
  readonly subject: string
}

/** A session id the client presented, opened: the replica that holds it and the backend's own id. */
export interface OpenedSession {
  readonly replica: Upstream
  readonly sessionId: string
}

/** One sub-key per use (RFC 5869 §3.2: independent keys from one secret through `info`). */
export function subKey(key: Buffer, info: string): Buffer {
  return Buffer.from(hkdfSync('sha256', key, 'mcp-edge', info, 32))
}

/**
 * The owner as additional authenticated data: an id sealed for one principal does not open for
 * another, and the id itself does not reveal who that is. JSON makes the pair unambiguous
 * (`["a\u0000b","c"]` and `["a","b\u0000c"]` differ); without auth there is nobody to bind to.
 */
export function ownerAad(owner: HandleOwner | undefined): string {
  return owner === undefined ? 'anonymous' : JSON.stringify([owner.issuer, owner.subject])
}

/**
 * AES-256-GCM with a random nonce, output `base64url(nonce ‖ ciphertext ‖ tag)`. Authenticated
 * encryption: nobody without the key reads the plaintext, and any change to the token or to the
 * additional data makes opening fail.
 */
export class Sealer {
  /**
   * @param nonceKey when set, the nonce is HMAC(nonceKey, aad, plaintext) instead of random
   * (the synthetic-IV idea of RFC 5297): the same handle seals to the same token,
   * and a nonce repeats only for the very same input, which reveals nothing but that equality.
   */
  constructor(
    private readonly key: Buffer,
    private readonly nonceKey?: Buffer,
  ) {}

  seal(plain: string, aad: string): string {
    const nonce =
      this.nonceKey === undefined
        ? randomBytes(NONCE_BYTES)
        : createHmac('sha256', this.nonceKey)
            .update(`${aad.length}:${aad}${plain}`) // length-prefixed: unambiguous
            .digest()
            .subarray(0, NONCE_BYTES)
    const c = createCipheriv('aes-256-gcm', this.key, nonce, { authTagLength: TAG_BYTES })
    c.setAAD(Buffer.from(aad, 'utf8'))
    const body = Buffer.concat([nonce, c.update(plain, 'utf8'), c.final(), c.getAuthTag()])
    return body.toString('base64url')
  }

  open(token: string, aad: string): string | undefined {
    if (!B64URL.test(token)) return undefined
    const raw = Buffer.from(token, 'base64url')
    if (raw.length < NONCE_BYTES + TAG_BYTES) return undefined
    const d = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, NONCE_BYTES), {
      authTagLength: TAG_BYTES,
    })
    d.setAAD(Buffer.from(aad, 'utf8'))
    d.setAuthTag(raw.subarray(raw.length - TAG_BYTES))
    try {
      const plain = Buffer.concat([
        d.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)),
        d.final(),
      ])
      return plain.toString('utf8')
    } catch {
      return undefined // SECURITY: a tag that does not verify (tampered, other key, other owner) opens nothing
    }
  }
}

/**
 * Handles the gateway hands out for one server: 2025-era `Mcp-Session-Id`s and task ids, sealed
 * so that they need no shared state (docs/balancing.md "Legacy sessions").
 *
 * A session id is `<replica tag>.<sealed>`: the tag is a keyed hash of the replica's URL (stable
 * across gateways and config order, opaque: no address leaks), and the sealed part is the
 * backend's own id encrypted with AES-256-GCM, authenticated together with the server, the tag and
 * the owner. A client can neither read, forge nor move a session, and a session opened by one
 * principal is unknown to every other. Any gateway with the same key opens it.
 *
 * A task id is the backend's task id sealed the same way, bound to the server and the owner,
 * with a nonce derived from its input so that one task always has one id.
 */
export class SessionCodec {
  private readonly byTag = new Map<string, Upstream>()
  private readonly tagOf = new Map<Upstream, string>()
  private readonly sessions: Sealer
  private readonly tasks: Sealer

  constructor(
    key: Buffer,
    private readonly server: string,
    replicas: readonly Upstream[],
  ) {
    this.sessions = new Sealer(subKey(key, 'mcp-edge session ids v2'))
    // Task ids are deterministic: every answer about a task names it by the same id, which
    // clients compare (tasks/get results, notifications).
    this.tasks = new Sealer(
      subKey(key, 'mcp-edge task ids v1'),
      subKey(key, 'mcp-edge task nonces v1'),
    )
    const tagKey = subKey(key, 'mcp-edge replica tags v2')
    for (const r of replicas) {
      const tag = createHmac('sha256', tagKey)
        .update(r.url.href)
        .digest()
        .subarray(0, 9)
        .toString('base64url')
      this.byTag.set(tag, r)
      this.tagOf.set(r, tag)
    }
  }

  /**
   * The id to hand `owner` for a session `replica` issued; undefined for a backend id too long to
   * seal (the caller then relays no id at all).
   */
  seal(replica: Upstream, sessionId: string, owner: HandleOwner | undefined): string | undefined {
    if (sessionId.length > MAX_UPSTREAM_ID) return undefined
    const tag = this.tagOf.get(replica) as string
    return `${tag}.${this.sessions.seal(sessionId, this.sessionAad(tag, owner))}`
  }

  /**
   * The replica and backend id, or undefined for anything unknown, malformed, tampered with,
   * sealed with another key or for another server, or presented by another principal.
   */
  open(token: string, owner: HandleOwner | undefined): OpenedSession | undefined {
    if (token.length > MAX_TOKEN) return undefined
    const dot = token.indexOf('.')
    if (dot < 0) return undefined
    const tag = token.slice(0, dot)
    const replica = this.byTag.get(tag)
    if (replica === undefined) return undefined
    const sessionId = this.sessions.open(token.slice(dot + 1), this.sessionAad(tag, owner))
    return sessionId === undefined ? undefined : { replica, sessionId }
  }

  /** The task id to hand `owner` for a task the backend created; undefined if too long. */
  sealTask(taskId: string, owner: HandleOwner | undefined): string | undefined {
    if (taskId.length > MAX_UPSTREAM_ID) return undefined
    return this.tasks.seal(taskId, this.taskAad(owner))
  }

  /** The backend's task id, or undefined unless `owner` is the principal the id was sealed for. */
  openTask(token: string, owner: HandleOwner | undefined): string | undefined {
    if (token.length > MAX_TOKEN) return undefined
    return this.tasks.open(token, this.taskAad(owner))
  }

  private sessionAad(tag: string, owner: HandleOwner | undefined): string {
    return `session\0${this.server}\0${tag}\0${ownerAad(owner)}`
  }

  private taskAad(owner: HandleOwner | undefined): string {
    return `task\0${this.server}\0${ownerAad(owner)}`
  }
}
