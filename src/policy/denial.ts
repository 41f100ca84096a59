import type { McpTarget } from '../mcp/classify.js'

/**
 * The answer to a denied target: byte for byte what a conformant server sends for a target that
 * does not exist (server/tools.mdx §Error Handling: -32602 "Unknown tool"; resources.mdx: -32602
 * "Resource not found" with `data.uri`; an event type, as a server answers a name it does not list:
 * -32602 "Unknown event", docs/events.md; a skill, skills.mdx §Error Handling: -32602 "No skill is
 * served at <uri>"), in band on HTTP 200. No gateway marker, so the
 * allowlist does not reveal what exists; the audit log keeps the real reason.
 * `rawId` is the request id exactly as the client wrote it.
 */
export function renderDenial(target: McpTarget, rawId: string): string {
  const id = rawId
  if (target.kind === 'resource') {
    const uri = JSON.stringify(target.uri)
    const message = JSON.stringify(`Resource not found: ${target.uri}`)
    const error = `{"code":-32602,"message":${message},"data":{"uri":${uri}}}`
    return `{"jsonrpc":"2.0","id":${id},"error":${error}}`
  }
  if (target.kind === 'skill') {
    const message = JSON.stringify(`No skill is served at ${target.name}`)
    return `{"jsonrpc":"2.0","id":${id},"error":{"code":-32602,"message":${message}}}`
  }
  const what =
    target.kind === 'tool'
      ? 'Unknown tool'
      : target.kind === 'event'
        ? 'Unknown event'
        : 'Unknown prompt'
  const message = JSON.stringify(`${what}: ${target.name}`)
  return `{"jsonrpc":"2.0","id":${id},"error":{"code":-32602,"message":${message}}}`
}
