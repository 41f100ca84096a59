import type { McpTarget } from '../mcp/classify.js'
import { isRecord, type JsonRpcMessage } from '../mcp/jsonrpc.js'

/**
 * Everything policy judges in a request: the targets the classify stage found (verified body, or
 * a trusted backend's Mcp-Name), plus the URI of a 2025-era `resources/subscribe`, which names a
 * resource too (those bodies are always parsed; see parseMethodsFor).
 */
export function policyTargets(
  targets: readonly McpTarget[],
  message: JsonRpcMessage | undefined,
): readonly McpTarget[] {
  if (message?.method !== 'resources/subscribe') return targets
  const uri = isRecord(message.params) ? message.params.uri : undefined
  // A subscribe without a string uri names nothing; the backend refuses it as invalid params.
  return typeof uri === 'string' ? [...targets, { kind: 'resource', uri }] : targets
}
