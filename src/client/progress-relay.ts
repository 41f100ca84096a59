import { randomBytes } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import type { Plan } from '../endpoint/plan.js'
import type { BodyTransform, HeaderMap } from '../mcp/body-transform.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { locate } from '../mcp/rewrite.js'
import { hasRoom } from '../upstream/pool.js'
import { leaseReplica, streamEndpoint } from './member-stream.js'
import type { Upstream } from '../upstream/upstream.js'
import type { AskServer } from './ask.js'
import type { MemberSession } from './member-sessions.js'
import {
  getHeaders,
  StreamRefused,
  type SessionStreams,
  type SessionTap,
} from './session-stream.js'

/** Progress that arrived before the answer's head, held until it is out (then dropped). */
const MAX_EARLY_BYTES = 64 * 1024
/** A client that does not read: progress is advisory, so it is dropped rather than buffered. */
const MAX_BUFFERED = 1024 * 1024
/**
 * How long a call waits for the session's stream to open before it is sent anyway: a member
 * answers a GET's head at once, and one that does not (a buffering proxy holds it) must not hold
 * up the call; the stream still serves the call once it opens.
 */
const OPEN_WAIT_MS = 1000
const PROGRESS_TOKEN = Buffer.from('"progressToken"')

/**
 * The progress of one call streamed to a 2025-only member within a session the gateway holds
 * (docs/virtual-servers.md "2025-only members"). A 2025-era server may send a request's progress
 * on the session's standalone GET stream instead of the request's own: mcp-framework sends all of
 * it there, although spec 2025-11-25 basic/transports §Listening for Messages from the Server says
 * what goes on that stream SHOULD be unrelated to running requests. A direct client reads its
 * session's GET stream; nobody reads that of a session the gateway holds. So for a call that asks
 * for progress (spec 2025-11-25 basic/utilities/progress: `params._meta.progressToken`) the
 * gateway reads it while the call runs and writes the call's progress into the call's own answer,
 * between its events: where a 2025-era client takes it too (§Sending Messages to the Server:
 * what precedes the response there SHOULD relate to the request), and the only place a 2026-07-28
 * client has (spec 2026-07-28 basic/utilities/progress).
 *
 * SECURITY: the member gets a token of the gateway's own for the call, random, in place of the
 * client's: a session's stream carries whatever the member sends to the session (the caller's
 * other calls, and with mcp-framework every session's progress), so only progress carrying this
 * call's unguessable token is relayed, and nothing else from that stream reaches the call. The
 * client's token is put back, byte for byte, in what reaches the client: the relayed progress and
 * the events of the call's own SSE answer.
 */
export class ProgressRelay {
  /** The member's token's text (a JSON string's content, nothing to escape in it). */
  private readonly bare: Buffer
  /** The client's token as the client wrote it: a JSON string or an integer. */
  private readonly client: Buffer
  /** The client's token as text inside a JSON string: a string's content, or the digits. */
  private readonly clientText: Buffer
  /** The call's SSE answer once its head is out: progress goes between its events. */
  private answer: BodyTransform | undefined
  /** The answer is not an SSE stream (JSON, a refusal): there is nowhere to put progress. */
  private closedOff = false
  private early: Buffer[] = []
  private earlyBytes = 0
  private tap: SessionTap | undefined
  private release: (() => void) | undefined

  private constructor(
    /** The body for the member: the client's, with the gateway's token. */
    readonly body: Buffer,
    private readonly token: string,
    clientToken: string,
    private readonly res: ServerResponse,
  ) {
    this.bare = Buffer.from(token)
    this.client = Buffer.from(clientToken)
    this.clientText = clientToken.startsWith('"')
      ? this.client.subarray(1, this.client.length - 1)
      : this.client
  }

  /** The relay of a call whose body asks for progress; undefined when it does not. */
  static of(body: Buffer, res: ServerResponse): ProgressRelay | undefined {
    if (!body.includes(PROGRESS_TOKEN)) return undefined
    const text = body.toString('utf8')
    // Present exactly once (mcp/rewrite.ts locate): a body that repeats it is relayed as it is.
    const span = locate(text, ['params', '_meta', 'progressToken'])
    if (span === undefined) return undefined
    const raw = text.slice(span[0], span[1])
    // spec 2025-11-25 basic/utilities/progress: a token is a string or an integer.
    if (!/^(?:"|-?[0-9])/.test(raw)) return undefined
    const token = `mcp-edge-progress-${randomBytes(16).toString('hex')}`
    const out = `${text.slice(0, span[0])}${JSON.stringify(token)}${text.slice(span[1])}`
    return new ProgressRelay(Buffer.from(out, 'utf8'), token, raw, res)
  }

  /**
   * `plan` with the client's token put back into its SSE answer, once the session's stream is
   * open (so no progress the member sends at once is missed; at most OPEN_WAIT_MS): opened by this
   * call on the replica that holds the session, unless another reader has it open already (a
   * listening client's change notifications), and counted against the replica's `maxStreams`
   * while the call runs. Without room for a stream, or when the member offers none, the call goes
   * ahead without it: its progress is then what the member sends on the request's own stream.
   */
  async attach(
    plan: Plan,
    streams: SessionStreams,
    member: AskServer,
    session: MemberSession,
  ): Promise<Plan> {
    const inner = plan.transform
    const planned: Plan = {
      ...plan,
      transform: (status: number, h: HeaderMap) => this.reading(inner?.(status, h)),
    }
    const up = session.pin as Upstream | undefined
    // A member without sessions has no stream of the session to read.
    if (up === undefined || session.sessionId === undefined || streams.none.has(member.name))
      return planned
    // Advisory: without room for a stream the call goes ahead without one, never refused for it.
    if (!hasRoom(up, true)) return planned
    this.release = leaseReplica(member, up).release
    const ep = streamEndpoint(member, up, getHeaders(plan.headers, session))
    const tap = streams.tap(session, ep, (m) => this.relay(m))
    this.tap = tap
    tap.opened.catch((err: unknown) => {
      if (err instanceof StreamRefused && err.status === 405) streams.none.add(member.name)
      if (this.tap === tap) this.close()
    })
    let timer: NodeJS.Timeout | undefined
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, OPEN_WAIT_MS)))
    await Promise.race([tap.opened.catch(() => undefined), waited])
    clearTimeout(timer)
    return planned
  }

  /** Stops reading the session's stream for this call (the call is over). */
  close(): void {
    this.tap?.close()
    this.tap = undefined
    this.release?.()
    this.release = undefined
    this.early = []
  }

  /** A message of the session's stream: this call's progress goes to the client. */
  private relay(m: Readonly<Record<string, unknown>>): void {
    if (m.method !== 'notifications/progress' || 'id' in m || !isRecord(m.params)) return
    if (m.params.progressToken !== this.token) return
    const data = JSON.stringify({ jsonrpc: '2.0', method: m.method, params: m.params })
    const event = this.restore(Buffer.from(`event: message\ndata: ${data}\n\n`, 'utf8'))
    const answer = this.answer
    if (answer === undefined) {
      if (this.closedOff || this.earlyBytes + event.length > MAX_EARLY_BYTES) return
      this.early.push(event)
      this.earlyBytes += event.length
      return
    }
    // Only between the answer's events, before its response: a client drops later progress.
    if (answer.answered !== false || !this.res.headersSent || this.res.writableEnded) return
    if (this.res.writableLength > MAX_BUFFERED) return
    this.res.write(event)
  }

  /** How the call's answer is read: an SSE answer gets the client's token back and the progress. */
  private reading(t: BodyTransform | undefined): BodyTransform | undefined {
    if (t === undefined || !t.streaming) {
      this.closedOff = true
      this.early = []
      return t
    }
    const answer: BodyTransform = {
      streaming: true,
      // An SSE reader always says (mcp/sse-answer.ts); one that did not would never be answered.
      get answered(): boolean {
        return t.answered !== false
      },
      stalled: () => t.stalled?.(),
      // Progress that came before these bytes goes out before them, unless the response went out.
      push: (chunk) => {
        const late = t.answered === true
        const out = this.restoreOrNot(t.push(chunk))
        return late ? out : this.withEarly(out)
      },
      end: () => this.restoreOrNot(t.end()),
    }
    this.answer = answer
    // The head goes out right after this (upstream/proxy-handler.ts): early progress follows it.
    queueMicrotask(() => this.flushEarly())
    return answer
  }

  private flushEarly(): void {
    const out = this.withEarly(undefined)
    if (out === undefined || this.answer?.answered !== false) return
    if (this.res.headersSent && !this.res.writableEnded) this.res.write(out)
  }

  private withEarly(out: Buffer | undefined): Buffer | undefined {
    if (this.early.length === 0) return out
    const early = Buffer.concat(out === undefined ? this.early : [...this.early, out])
    this.early = []
    this.earlyBytes = 0
    return early
  }

  private restoreOrNot(out: Buffer | undefined): Buffer | undefined {
    return out === undefined ? undefined : this.restore(out)
  }

  /**
   * Every occurrence of the gateway's token as the client's, as the member would have written the
   * client's: the value of a `progressToken` member becomes the client's token as the client wrote
   * it (a string or an integer), and the token inside any other string (a tool that echoes it)
   * becomes the client's token as text, so `"text":"<token>"` stays a string whatever the client's
   * token is.
   */
  private restore(out: Buffer): Buffer {
    let at = out.indexOf(this.bare)
    if (at === -1) return out
    const parts: Buffer[] = []
    let pos = 0
    while (at !== -1) {
      const end = at + this.bare.length
      if (isProgressTokenValue(out, at - 1, end)) {
        parts.push(out.subarray(pos, at - 1), this.client)
        pos = end + 1
      } else {
        parts.push(out.subarray(pos, at), this.clientText)
        pos = end
      }
      at = out.indexOf(this.bare, pos)
    }
    parts.push(out.subarray(pos))
    return Buffer.concat(parts)
  }
}

const QUOTE = 0x22
const COLON = 0x3a

/** Whether the string `out[open..close]` (its quotes) is the value of a `progressToken` member. */
function isProgressTokenValue(out: Buffer, open: number, close: number): boolean {
  if (open < 0 || out[open] !== QUOTE || out[close] !== QUOTE) return false
  let i = skipSpaceBack(out, open - 1)
  if (out[i] !== COLON) return false
  i = skipSpaceBack(out, i - 1)
  const start = i + 1 - PROGRESS_TOKEN.length
  return start >= 0 && out.subarray(start, i + 1).equals(PROGRESS_TOKEN)
}

/** The last index at or before `i` that is not JSON whitespace. */
function skipSpaceBack(out: Buffer, i: number): number {
  while (i >= 0 && (out[i] === 0x20 || out[i] === 0x09 || out[i] === 0x0a || out[i] === 0x0d)) i--
  return i
}
