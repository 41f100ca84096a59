import { isRecord } from '../mcp/jsonrpc.js'
import { ask, ownRequest, type AskServer } from '../endpoint/ask.js'
import { decideCall, type CallName, type CallVerdict } from './call.js'
import type { ServerCatalog } from './curate.js'
import type { CatalogKind } from './definition.js'
import type { PinState } from './pin-state.js'

/** Pages one probe reads at most: a backend cannot keep the gateway paging forever. */
const MAX_PAGES = 20
/** A kind probed this recently is not probed again for a name still unseen (no stampede). */
const QUIET_MS = 5000
const PROBE_ID = '"mcp-edge-catalog-probe"'

interface ProbeMemo {
  running?: Promise<void> | undefined
  at: number
}
const memos = new WeakMap<PinState, Record<CatalogKind, ProbeMemo>>()

/**
 * Reads a server's own list (all pages) so the pins learn what it says now, for a call to a name
 * no list has shown this runtime (docs/catalog.md §Run-time pinning: a call is judged by the
 * definition the backend last listed). It goes through the server's attempt loop (replicas,
 * retries, health) with its configured upstream headers, as the gateway's own request: a server
 * with `tokenExchange` has no credentials of the gateway's, and is not probed (the call is then
 * refused until a list was seen). Failures are swallowed: the caller refuses what is still unseen.
 */
async function probeList(
  server: AskServer,
  pins: PinState,
  kind: CatalogKind,
  maxBytes: number,
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
  m.running = readAll(server, pins, kind, maxBytes)
    .catch(() => undefined)
    .finally(() => (m.running = undefined))
  return m.running
}

async function readAll(
  server: AskServer,
  pins: PinState,
  kind: CatalogKind,
  maxBytes: number,
): Promise<void> {
  const method = `${kind}/list`
  let cursor: string | undefined
  for (let page = 0; page < MAX_PAGES; page++) {
    const body = Buffer.from(listBody(method, cursor), 'utf8')
    const answer = await ask(server, ownRequest(method, body, PROBE_ID), {
      auth: undefined,
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

/** A 2026-07-28 list request with the envelope every modern request carries (basic §_meta). */
function listBody(method: string, cursor: string | undefined): string {
  const params = {
    ...(cursor === undefined ? {} : { cursor }),
    _meta: {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientInfo': { name: 'mcp-edge', version: '0' },
      'io.modelcontextprotocol/clientCapabilities': {},
    },
  }
  return `{"jsonrpc":"2.0","id":${PROBE_ID},"method":${JSON.stringify(method)},"params":${JSON.stringify(params)}}`
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
  await probeList(server, catalog.pins, call.kind, maxBytes)
  return decideCall(catalog, call)
}
