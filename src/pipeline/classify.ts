import { classify, type McpRequestInfo } from '../mcp/classify.js'
import type { Stage } from './chain.js'

/** A GET or DELETE on a 2025-era session: no body, nothing to classify but the era. */
const LEGACY_SESSION_REQUEST: McpRequestInfo = {
  era: 'legacy',
  version: undefined,
  method: undefined,
  kind: 'unknown',
  targets: [],
  verified: false,
  message: undefined,
}

/** Classifies the request from its headers, parsing the body only when a decision needs it. */
export const classifyRequest = (): Stage =>
  function classifyRequest(c, next) {
    if (c.env.incoming.method !== 'POST') c.set('mcp', LEGACY_SESSION_REQUEST)
    else c.set('mcp', classify(c.get('head'), c.get('body'), c.get('server').classify))
    return next()
  }
