/** The MCP requests the bench sends: modern (2026-07-28) envelope plus SEP-2243 routing headers. */

export type BenchMethod = 'tools/call' | 'tools/list'

const PROTOCOL_VERSION = '2026-07-28'
const TOOL_NAME = 'get_forecast'

/** One POST, ready for the load generator or a one-off check. */
export interface McpRequest {
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** Builds the request for a method; the load uses id 1, checks use their own ids. */
export function buildRequest(method: BenchMethod, id: string | number = 1): McpRequest {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': PROTOCOL_VERSION,
    'mcp-method': method,
  }
  // SEP-2243: Mcp-Name only accompanies the gated methods, tools/call among them.
  if (method === 'tools/call') headers['mcp-name'] = TOOL_NAME
  const params = method === 'tools/call' ? { name: TOOL_NAME, arguments: { city: 'Paris' } } : {}
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
      },
    },
  })
  return { headers, body }
}
