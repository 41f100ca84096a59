import { randomBytes } from 'node:crypto'
import { isRecord } from '../mcp/jsonrpc.js'
import { ownerAad, Sealer, subKey, type HandleOwner } from '../upstream/sessions.js'

/** Longest session id a client may present; anything longer is refused before any crypto runs. */
const MAX_TOKEN = 4096
/**
 * Largest sealed state. Client capabilities are copied into it so that any gateway replica can
 * initialise a member for this session; a client that declares more than this gets a session
 * whose members see empty capabilities (the gateway answers the requests it routes either way).
 */
const MAX_CAPS_JSON = 1536
const MAX_INFO_FIELD = 128

/** What a 2025-era session on a virtual server is, sealed into its `Mcp-Session-Id`. */
export interface VirtualSession {
  /** Random id of this session: keys the member sessions a gateway replica holds for it. */
  readonly id: string
  /** The protocol version negotiated in `initialize` (spec 2025-11-25 basic/lifecycle). */
  readonly version: string
  /** The client's declared capabilities, passed on when the gateway initialises a member. */
  readonly capabilities: Readonly<Record<string, unknown>>
  /** The client's `clientInfo`, passed on likewise. */
  readonly clientInfo: { readonly name: string; readonly version: string }
}

/**
 * The gateway's own 2025-era session ids for one virtual server (docs/virtual-servers.md
 * "2025-era clients"). The gateway answers `initialize` itself, so the session is the
 * gateway's: the id carries everything a request needs (negotiated version, client capabilities
 * and info), sealed with AES-256-GCM under `legacySessions.key` and authenticated together with
 * the virtual server's name and the owner, like src/upstream/sessions.ts. Any gateway replica
 * with the same key serves the session; no member's session id is in it, since a replica that
 * has none re-establishes its own (src/virtual/member-sessions.ts).
 */
export class VirtualSessionCodec {
  private readonly sealer: Sealer

  constructor(
    key: Buffer,
    private readonly virtual: string,
  ) {
    this.sealer = new Sealer(subKey(key, 'mcp-edge virtual session ids v1'))
  }

  /** A new session for `owner` from the `initialize` request's params. */
  issue(
    version: string,
    params: Readonly<Record<string, unknown>>,
    owner: HandleOwner | undefined,
  ): { readonly token: string; readonly session: VirtualSession } {
    const session: VirtualSession = {
      id: randomBytes(12).toString('base64url'),
      version,
      capabilities: boundedCaps(params.capabilities),
      clientInfo: clientInfoOf(params.clientInfo),
    }
    const plain = JSON.stringify([
      session.id,
      session.version,
      session.capabilities,
      session.clientInfo.name,
      session.clientInfo.version,
    ])
    return { token: this.sealer.seal(plain, this.aad(owner)), session }
  }

  /**
   * The session, or undefined for anything unknown, malformed, tampered with, sealed with another
   * key or for another virtual server, or presented by another principal.
   */
  open(token: string, owner: HandleOwner | undefined): VirtualSession | undefined {
    if (token.length > MAX_TOKEN) return undefined
    const plain = this.sealer.open(token, this.aad(owner))
    if (plain === undefined) return undefined
    const v: unknown = JSON.parse(plain)
    if (!Array.isArray(v) || v.length !== 5) return undefined
    const [id, version, capabilities, name, ver] = v as unknown[]
    if (typeof id !== 'string' || typeof version !== 'string' || !isRecord(capabilities))
      return undefined
    if (typeof name !== 'string' || typeof ver !== 'string') return undefined
    return { id, version, capabilities, clientInfo: { name, version: ver } }
  }

  private aad(owner: HandleOwner | undefined): string {
    return `virtual-session\0${this.virtual}\0${ownerAad(owner)}`
  }
}

function boundedCaps(caps: unknown): Readonly<Record<string, unknown>> {
  if (!isRecord(caps)) return {}
  return JSON.stringify(caps).length <= MAX_CAPS_JSON ? caps : {}
}

function clientInfoOf(info: unknown): VirtualSession['clientInfo'] {
  const field = (v: unknown): string =>
    typeof v === 'string' ? v.slice(0, MAX_INFO_FIELD) : 'unknown'
  return isRecord(info)
    ? { name: field(info.name), version: field(info.version) }
    : { name: 'unknown', version: 'unknown' }
}
