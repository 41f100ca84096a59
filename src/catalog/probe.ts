import { isRecord } from '../mcp/jsonrpc.js'
import {
  ask,
  ownModernBody,
  ownPropagation,
  ownRequest,
  type AskServer,
  type OwnIdentity,
} from '../client/ask.js'
import { decideCall, type CallName, type CallVerdict } from './call.js'
import type { ServerCatalog } from './curate.js'
import type { CatalogKind } from './definition.js'
import type { PinState } from './pin-state.js'

/** Pages one probe reads at most: a backend cannot keep the gateway paging forever. */
const MAX_PAGES = 20
/** A kind probed this recently is not probed again for a name still unseen (no stampede). */
const QUIET_MS = 5000

interface ProbeMemo {
  running?: Promise<void> | undefined
  at: number
}
const memos = new WeakMap<PinState, Record<CatalogKind, ProbeMemo>>()

/**
 * Reads a server's own list (all pages) so the pins learn what it says now, for a call to a name
 * no list has shown this runtime (docs/catalog.md §Run-time pinning: a call is judged by the
 * definition the backend last listed). It goes through the server's attempt loop (replicas,
 * retries, health) with its configured upstream headers, as the gateway's own request, which looks
 * like a client's (client/ask.ts ownRequest: a random id, the configured client's info and
 * headers): a backend that answered probes otherwise than clients would still have its clients'
 * lists judged, which is the check that counts. A server with `tokenExchange` has no credentials
 * of the gateway's, and is not probed (the call is then refused until a list was seen). Failures
 * are swallowed: the caller refuses what is still unseen.
 */
async function probeList(
  server: AskServer,
  pins: PinState,
  kind: CatalogKind,
  maxBytes: number,
  as: OwnIdentity,
  now: () => number = Date.now,
): Promise<void> {
  if (server.config.tokenExchange !== undefined) return
  let memo = memos.get(pins)
  if (memo === undefined) {
    memo = { tools: { at: -Infinity }, prompts: { at: -Infinity } }
    memos.set(pins, memo)
  }
  const m = memo[kind]
  if (m.running !== undefined) return m.running
  if (now() - m.at < QUIET_MS) return
  m.at = now()
  m.running = readAll(server, pins, kind, maxBytes, as)
    .catch(() => undefined)
    .finally(() => (m.running = undefined))
  return m.running
}

async function readAll(
  server: AskServer,
  pins: PinState,
  kind: CatalogKind,
  maxBytes: number,
  as: OwnIdentity,
): Promise<void> {
  const method = `${kind}/list`
  let cursor: string | undefined
  for (let page = 0; page < MAX_PAGES; page++) {
    const body = ownModernBody(method, cursor === undefined ? {} : { cursor }, as)
    const answer = await ask(server, ownRequest(server, body, as), {
      auth: undefined,
      propagation: ownPropagation(as),
      maxInspectBytes: maxBytes,
    })
    const result = answer.message.result
    if (answer.status !== 200 || !isRecord(result)) return
    const items = result[kind]
    if (!Array.isArray(items)) return
    for (const item of items as unknown[])
      if (isRecord(item) && typeof item.name === 'string') pins.visible(kind, item.name, item)
    const next = result.nextCursor
    if (typeof next !== 'string') return
    cursor = next
  }
}

/**
 * The verdict on a call (call.ts decideCall); a pinned name no list has shown yet is looked up in
 * the server's own list first, and stays refused when that list does not settle it.
 */
export async function judgeCall(
  server: AskServer,
  catalog: ServerCatalog,
  call: CallName,
  maxBytes: number,
): Promise<CallVerdict> {
  const verdict = decideCall(catalog, call)
  if (!('refused' in verdict) || verdict.refused !== 'unseen' || catalog.pins === undefined)
    return verdict
  await probeList(server, catalog.pins, call.kind, maxBytes, catalog.ownReads)
  return decideCall(catalog, call)
}
