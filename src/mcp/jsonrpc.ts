import { GatewayError } from '../errors.js'
import { findTopLevelId } from './raw-id.js'
import { JsonScanError, scanJson } from './strict-json.js'

/** A JSON-RPC 2.0 message as the client sent it, after strict parsing and shape checks. */
export interface JsonRpcMessage {
  readonly kind: 'request' | 'notification' | 'response'
  readonly method: string | undefined
  readonly params: Readonly<Record<string, unknown>> | undefined
  /** Raw JSON text of the id (undefined for notifications). */
  readonly rawId: string | undefined
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Strictly parses one JSON-RPC message from the body; throws GatewayError on any defect. */
export function parseMessage(body: Uint8Array, maxDepth: number): JsonRpcMessage {
  let text: string
  try {
    text = utf8.decode(body)
  } catch {
    throw new GatewayError('parse_error', 'body is not valid UTF-8')
  }
  let rawId: string | undefined
  try {
    const scan = scanJson(text, { maxDepth })
    if (scan.isArray) throw new GatewayError('batch_not_supported')
    rawId = scan.rawId
  } catch (err) {
    if (!(err instanceof JsonScanError)) throw err
    if (err.kind === 'syntax') throw new GatewayError('parse_error')
    if (err.kind === 'too_deep') throw new GatewayError('json_too_deep', err.message)
    throw new GatewayError('duplicate_key', err.message)
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    // The scanner accepts only what JSON.parse accepts; this is the belt to its braces.
    throw new GatewayError('parse_error')
  }
  return checkShape(value, rawId)
}

/** JSON-RPC 2.0 §4-5 shape; MCP adds: ids are strings or numbers, never null (basic/index.mdx). */
function checkShape(value: unknown, rawId: string | undefined): JsonRpcMessage {
  if (!isRecord(value)) throw new GatewayError('invalid_request', 'body is not a JSON-RPC object')
  if (value.jsonrpc !== '2.0') throw new GatewayError('invalid_request', 'jsonrpc must be "2.0"')
  if (rawId !== undefined && typeof value.id !== 'string' && typeof value.id !== 'number') {
    throw new GatewayError('invalid_request', 'id must be a string or a number')
  }
  if ('method' in value) {
    if (typeof value.method !== 'string') {
      throw new GatewayError('invalid_request', 'method must be a string')
    }
    const params = value.params
    if (params !== undefined && !isRecord(params)) {
      throw new GatewayError('invalid_request', 'params must be an object')
    }
    return {
      kind: rawId === undefined ? 'notification' : 'request',
      method: value.method,
      params,
      rawId,
    }
  }
  if (rawId !== undefined && ('result' in value || 'error' in value)) {
    return { kind: 'response', method: undefined, params: undefined, rawId }
  }
  throw new GatewayError('invalid_request', 'not a JSON-RPC request')
}

/** Best-effort raw id for an error reply to a body that was not (or could not be) parsed. */
export function peekRawId(body: Uint8Array | undefined): string | undefined {
  if (body === undefined || body.length === 0) return undefined
  try {
    return findTopLevelId(utf8.decode(body))
  } catch {
    return undefined
  }
}

/** Narrowing helper for parsed JSON. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}
