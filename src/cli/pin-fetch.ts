/**
 * Asks one configured server for its instructions and every tool and prompt definition it lists,
 * for `mcp-edge pin` (docs/catalog.md §Pinning). The requests go through the same path as a
 * virtual server's member requests (client/ask.ts): the server's replicas, retries, health,
 * timeouts and its configured upstream headers, so the pin sees what the gateway's own
 * credentials see; and they look like a client's (ownRequest: random ids, the configured
 * `ownRequests` client), so a backend cannot show the pin other text than clients get. A server
 * that speaks only 2025-era protocol is asked within a session the gateway initialises
 * (client/era-session.ts), as virtual servers do.
 */
import { instructionsOf, type CatalogKind } from '../catalog/definition.js'
import { isRecord } from '../mcp/jsonrpc.js'
import { LEGACY_VERSION } from '../mcp/protocol.js'
import { UpstreamFailure } from '../upstream/failure.js'
import {
  ask,
  ownModernBody,
  ownPropagation,
  ownRequest,
  type AskServer,
  type OwnIdentity,
  type ServerAnswer,
} from '../client/ask.js'
import { endSession, heldSession } from '../client/era.js'
import {
  initializeMember,
  sendInLegacySession,
  type ClientSession,
  type MemberSend,
} from '../client/era-session.js'
import { type MemberSession, MemberSessions } from '../client/member-sessions.js'
import type { HeldSession } from '../endpoint/plan.js'

/** Pages one list may have before the server counts as looping (its cursors never end). */
const MAX_PAGES = 1000

/** What pin reads by name: tools and prompts, and skills by the URI of their SKILL.md. */
type ListedKind = CatalogKind | 'skills'

/** Definitions by the server's own names, as it listed them (whole items), per kind. */
export type ServerDefinitions = Readonly<
  Record<ListedKind, ReadonlyMap<string, Readonly<Record<string, unknown>>>>
> & {
  /** The instructions its discovery (or `initialize`) gave, if any (definition.ts instructionsOf). */
  readonly instructions: string | undefined
}

/** A server that could not be asked, or that answered something a pin cannot use. */
class PinFetchError extends Error {
  override readonly name = 'PinFetchError'
}

const LIST_METHOD: Readonly<Record<ListedKind, string>> = {
  tools: 'tools/list',
  prompts: 'prompts/list',
  skills: 'skills/list',
}

/** What names an item of each list: a skill is named by the URI of its SKILL.md. */
const KEY_FIELD: Readonly<Record<ListedKind, 'name' | 'uri'>> = {
  tools: 'name',
  prompts: 'name',
  skills: 'uri',
}

/** The skills extension's identifier, under `capabilities.extensions` (skills.mdx). */
const SKILLS_EXTENSION = 'io.modelcontextprotocol/skills'

/**
 * Every tool, prompt and skill `server` lists, all pages; a kind the server declares no capability
 * for is empty (spec 2026-07-28 server/tools §Capabilities, server/prompts §Capabilities;
 * skills.mdx §Capability Negotiation: skills/list only after the server declares the extension).
 * Throws PinFetchError naming the server.
 */
export async function fetchDefinitions(
  server: AskServer,
  maxBytes: number,
  as: OwnIdentity,
): Promise<ServerDefinitions> {
  let conversation: Conversation | undefined
  try {
    conversation = await open(server, maxBytes, as)
    const out: Record<ListedKind, Map<string, Readonly<Record<string, unknown>>>> = {
      tools: new Map(),
      prompts: new Map(),
      skills: new Map(),
    }
    for (const kind of ['tools', 'prompts'] as const) {
      if (isRecord(conversation.capabilities[kind])) await listAll(conversation, kind, out[kind])
    }
    const extensions = conversation.capabilities.extensions
    if (isRecord(extensions) && isRecord(extensions[SKILLS_EXTENSION]))
      await listAll(conversation, 'skills', out.skills)
    return { ...out, instructions: conversation.instructions }
  } catch (err) {
    throw new PinFetchError(`server ${server.name}: ${describe(err)}`, { cause: err })
  } finally {
    await conversation?.close()
  }
}

/** Reads every page of one list into `into`; a name listed twice is an error. */
async function listAll(
  c: Conversation,
  kind: ListedKind,
  into: Map<string, Readonly<Record<string, unknown>>>,
): Promise<void> {
  const method = LIST_METHOD[kind]
  const key = KEY_FIELD[kind]
  const seen = new Set<string>()
  let cursor: string | undefined
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await c.ask(method, cursor === undefined ? {} : { cursor })
    const items = result[kind]
    if (!Array.isArray(items)) throw new PinFetchError(`${method}: the result has no ${kind} list`)
    for (const item of items) {
      const name: unknown = isRecord(item) ? item[key] : undefined
      if (!isRecord(item) || typeof name !== 'string')
        throw new PinFetchError(`${method}: an item without a string ${key}`)
      if (into.has(name))
        throw new PinFetchError(`${method}: ${JSON.stringify(name)} is listed twice`)
      into.set(name, item)
    }
    const next = result.nextCursor
    if (next === undefined || next === null) return
    // spec 2026-07-28 utilities/pagination: an opaque string; one seen before would loop forever.
    if (typeof next !== 'string' || seen.has(next))
      throw new PinFetchError(`${method}: invalid or repeated nextCursor`)
    seen.add(next)
    cursor = next
  }
  throw new PinFetchError(`${method}: more than ${MAX_PAGES} pages`)
}

/** One open conversation with a server, in the era it speaks. */
interface Conversation {
  readonly capabilities: Readonly<Record<string, unknown>>
  /** What its discovery result said in `instructions` (definition.ts instructionsOf). */
  readonly instructions: string | undefined
  /** Sends one request; resolves to its JSON-RPC result, throws on the server's error. */
  ask(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>>
  /** Ends what the conversation left on the server (a 2025-era session). Never throws. */
  close(): Promise<void>
}

/** A 2025-era request body in a session (its id is ownRequest's to set). */
function legacyBody(method: string, params: Record<string, unknown>): Buffer {
  return Buffer.from(
    `{"method":${JSON.stringify(method)},"params":${JSON.stringify(params)},"jsonrpc":"2.0","id":0}`,
    'utf8',
  )
}

/** Sends one own request (client/ask.ts ownRequest gives it a fresh id), in `session` if set. */
type Send = (body: Buffer, session?: HeldSession) => Promise<ServerAnswer>

/**
 * Opens the conversation: `server/discover` in 2026-07-28, or, when the server refuses that as a
 * 2025-era server refuses a request without a session (a 4xx other than 404), an `initialize`
 * and its session (spec 2025-11-25 basic/lifecycle §Initialization; spec 2026-07-28
 * basic/versioning: a client falls back to `initialize` on such an answer).
 */
async function open(server: AskServer, maxBytes: number, as: OwnIdentity): Promise<Conversation> {
  // The gateway's own requests, planned and sent as a client's (client/ask.ts).
  const send: Send = (body, session) =>
    ask(server, ownRequest(server, body, as), {
      auth: undefined,
      propagation: ownPropagation(as),
      maxInspectBytes: maxBytes,
      session,
    })
  let answer: ServerAnswer
  try {
    answer = await send(ownModernBody('server/discover', {}, as))
  } catch (err) {
    // 2025-era servers refuse a request without a session with `"id": null`, which the id check
    // takes for another request's answer (as client/era.ts notes).
    if (!(err instanceof UpstreamFailure) || !legacyRefusal(err.status)) throw err
    return legacy(server, send, as, `HTTP ${err.status}`)
  }
  const result = answer.message.result
  if (answer.status === 200 && isRecord(result)) {
    const caps = result.capabilities
    return {
      capabilities: isRecord(caps) ? caps : {},
      instructions: instructionsOf(result),
      ask: async (method, params) => {
        const a = await send(ownModernBody(method, params, as))
        return resultOf(method, a.status, a.message)
      },
      close: async () => {},
    }
  }
  const why = `HTTP ${answer.status}${errorText(answer.message)}`
  if (!legacyRefusal(answer.status)) throw new PinFetchError(`server/discover failed: ${why}`)
  return legacy(server, send, as, why)
}

function legacyRefusal(status: number | undefined): boolean {
  return status !== undefined && status >= 400 && status < 500 && status !== 404
}

/**
 * A 2025-era session with the server, through the member-era code virtual servers use, as the
 * configured client (its info and capabilities in `initialize`).
 */
async function legacy(
  server: AskServer,
  send: Send,
  as: OwnIdentity,
  refused: string,
): Promise<Conversation> {
  const sessions = new MemberSessions(1)
  const client: ClientSession = {
    id: 'pin',
    // What a 2025-era server is asked for when it refuses 2026-07-28 (spec 2025-11-25).
    version: LEGACY_VERSION,
    capabilities: as.clientCapabilities,
    clientInfo: as.clientInfo,
  }
  // The id era-session writes is replaced by a fresh one (ownRequest), which the answer carries.
  const via: MemberSend = async (s, body, _rawId, pin) => {
    const a = await send(body, heldSession(s, pin))
    return { status: a.status, message: a.message, sessionId: a.sessionId, pin: a.upstream }
  }
  let session: MemberSession
  try {
    session = await sessions.get('pin', server.name, () => initializeMember(via, client))
  } catch (err) {
    throw new PinFetchError(
      `server/discover refused (${refused}) and initialize failed: ${describe(err)}`,
    )
  }
  return {
    capabilities: session.capabilities ?? {},
    instructions: instructionsOf({ instructions: session.instructions }),
    ask: async (method, params) => {
      const a = await sendInLegacySession(
        sessions,
        'pin',
        server.name,
        client,
        via,
        legacyBody(method, params),
        '0',
      )
      session = a.session
      return resultOf(method, a.status, a.message ?? {})
    },
    close: () => endSession(server, session).catch(() => undefined), // it forgets idle ones
  }
}

/** The result of a list answer, or a PinFetchError with the server's error. */
function resultOf(
  method: string,
  status: number,
  message: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const result = message.result
  if (status === 200 && isRecord(result)) return result
  throw new PinFetchError(`${method} failed: HTTP ${status}${errorText(message)}`)
}

/** `: -32601 Method not found` for a JSON-RPC error, else ''. */
function errorText(message: Readonly<Record<string, unknown>>): string {
  const e = message.error
  if (!isRecord(e)) return ''
  return `: ${String(e.code)} ${typeof e.message === 'string' ? e.message : ''}`.trimEnd()
}

/** An error and its causes, one line. */
function describe(err: unknown): string {
  let text = err instanceof Error ? err.message : String(err)
  let cause = err instanceof Error ? err.cause : undefined
  while (cause instanceof Error) {
    if (!text.includes(cause.message)) text += ` (${cause.message})`
    cause = cause.cause
  }
  return text
}
