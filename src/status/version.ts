import { GATEWAY_INFO } from '../mcp/protocol.js'

/** The gateway's version: package.json's, read once with its name (mcp/protocol.ts GATEWAY_INFO). */
export function gatewayVersion(): string {
  return GATEWAY_INFO.version
}
