/**
 * Canned backend answers. Each is split around the JSON-RPC id so the backend only splices the
 * echoed id per request, as a real server's serialisation cost is not what this bench measures.
 */

const PROTOCOL_VERSION = '2026-07-28'

/** A ~1 KB tools/call result, everything after `"id":`. */
export const CALL_RESULT_TAIL = `,"result":${JSON.stringify({
  content: [{ type: 'text', text: forecastText(1000) }],
  resultType: 'complete',
})}}`

/** A ~20 KB tools/list result with 60 tools that a spec-following edge may cache. */
export const LIST_RESULT_TAIL = listTail({ ttlMs: 60_000, cacheScope: 'public' })

/**
 * The same list marked uncacheable (3 bytes shorter), so the forwarding cost of tools/list stays
 * measurable once the gateway has a list cache.
 */
export const LIST_NO_STORE_TAIL = listTail({ ttlMs: 0, cacheScope: 'private' })

/** Answer to `initialize`, for clients that probe the backend by hand. */
export const INITIALIZE_TAIL = `,"result":${JSON.stringify({
  protocolVersion: PROTOCOL_VERSION,
  capabilities: { tools: { listChanged: false } },
  serverInfo: { name: 'bench-backend', version: '1' },
})}}`

/** Builds the whole response body for one request id. */
export function withId(id: unknown, tail: string): string {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id ?? null)}${tail}`
}

/** A JSON-RPC error body (method not found, parse error). */
export function errorBody(id: unknown, code: number, message: string): string {
  const error = JSON.stringify({ code, message })
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id ?? null)},"error":${error}}`
}

function listTail(cache: { ttlMs: number; cacheScope: 'public' | 'private' }): string {
  const tools = Array.from({ length: 60 }, (_, i) => tool(i))
  return `,"result":${JSON.stringify({ tools, resultType: 'complete', ...cache })}}`
}

function tool(i: number): Record<string, unknown> {
  const name = i === 0 ? 'get_forecast' : `tool_${String(i).padStart(2, '0')}`
  return {
    name,
    title: `Bench tool ${i}`,
    description:
      `Returns synthetic data for benchmark purposes (tool ${i}); ` +
      'the text only pads the list to a realistic size.',
    inputSchema: {
      type: 'object',
      properties: {
        city: { type: 'string', description: 'City name' },
        days: { type: 'integer', minimum: 1, maximum: 14 },
      },
      required: ['city'],
    },
  }
}

function forecastText(bytes: number): string {
  const line = 'Paris: 18 C, light rain in the afternoon, wind 12 km/h from the south-west. '
  return line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes)
}
