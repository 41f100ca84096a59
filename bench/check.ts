/**
 * Sanity checks before any load: a target that answers errors or the wrong id must fail the run
 * instead of producing a "fast" number.
 */
import { buildRequest, type BenchMethod } from './requests.js'

const TIMEOUT_MS = 5000

/** Expected shape of the canned answers, so a truncated or rewritten body is caught too. */
const EXPECT: Readonly<Record<BenchMethod, (result: Record<string, unknown>) => boolean>> = {
  'tools/call': (r) => Array.isArray(r['content']) && r['content'].length > 0,
  'tools/list': (r) => Array.isArray(r['tools']) && r['tools'].length === 60,
}

/** Sends the load's request (id 1) and one with a fresh string id; both must come back intact. */
export async function checkTarget(
  label: string,
  url: string,
  method: BenchMethod,
  extraHeaders: Readonly<Record<string, string>> = {},
): Promise<void> {
  for (const id of [1, `check-${method}-${Date.now()}`]) {
    const { status, message, raw } = await post(url, method, id, extraHeaders)
    const where = `${label}: ${method} id=${JSON.stringify(id)} → HTTP ${status}`
    if (status !== 200) throw new Error(`${where}, expected 200. Body: ${raw.slice(0, 300)}`)
    if (message === undefined)
      throw new Error(`${where}, body is not JSON-RPC: ${raw.slice(0, 300)}`)
    if (message['id'] !== id) {
      throw new Error(`${where}, id not echoed (got ${JSON.stringify(message['id'])})`)
    }
    const result = message['result']
    if (
      typeof result !== 'object' ||
      result === null ||
      !EXPECT[method](result as Record<string, unknown>)
    ) {
      throw new Error(`${where}, unexpected result: ${raw.slice(0, 300)}`)
    }
  }
}

/**
 * Whether `url` answers tools/list without reaching the backend: after one priming request, further
 * lists (each with its own id, which a cache must splice in) must leave the backend counter alone.
 */
export async function detectListCache(url: string, backendStatsUrl: string): Promise<boolean> {
  await checkTarget('gateway (cache probe)', url, 'tools/list')
  const before = await backendRequests(backendStatsUrl)
  for (let i = 0; i < 3; i++) await checkTarget('gateway (cache probe)', url, 'tools/list')
  return (await backendRequests(backendStatsUrl)) === before
}

/** The backend's request counter (GET /__stats). */
export async function backendRequests(statsUrl: string): Promise<number> {
  const res = await fetch(statsUrl, { signal: AbortSignal.timeout(TIMEOUT_MS) })
  const stats = (await res.json()) as { requests?: unknown }
  if (typeof stats.requests !== 'number') throw new Error(`bad backend stats from ${statsUrl}`)
  return stats.requests
}

interface Answer {
  readonly status: number
  readonly message: Record<string, unknown> | undefined
  readonly raw: string
}

async function post(
  url: string,
  method: BenchMethod,
  id: string | number,
  extraHeaders: Readonly<Record<string, string>>,
): Promise<Answer> {
  const { headers, body } = buildRequest(method, id)
  let res: Response
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { ...headers, ...extraHeaders },
      body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    })
  } catch (err) {
    throw new Error(`POST ${url} failed: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    })
  }
  const raw = await res.text()
  const isSse = (res.headers.get('content-type') ?? '').includes('text/event-stream')
  return { status: res.status, message: parseMessage(isSse ? lastSseData(raw) : raw), raw }
}

// A gateway may legitimately answer as an SSE stream; the response is the last event's data.
function lastSseData(raw: string): string {
  const events = raw.split(/\r?\n\r?\n/).map((event) =>
    event
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trimStart())
      .join('\n'),
  )
  return events.filter((data) => data.length > 0).at(-1) ?? ''
}

function parseMessage(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined
  } catch {
    return undefined
  }
}
