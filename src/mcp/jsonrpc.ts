import { GatewayError } from '../errors.js'
import type { ArgumentKeys } from './argument-keys.js'
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

// ignoreBOM keeps a leading U+FEFF in the text instead of dropping it silently; bodies that
// start with one are refused before decoding anyway.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** MCP ids are strings or integers (basic/index.mdx §Requests); `-0` is not written by integers. */
const INTEGER_ID = /^-?(?:0|[1-9][0-9]*)$/

/**
 * Strictly parses one JSON-RPC message from the body; throws GatewayError on any defect.
 * `contentType` is the request's, whose charset (if any) must be UTF-8.
 */
export function parseMessage(
  body: Uint8Array,
  maxDepth: number,
  contentType?: string,
  /** Judge keys at every depth (strict-json.ts `allKeys`): a condition reads the arguments. */
  allKeys = false,
  /** The argument keys conditions read (strict-json.ts `reads`), judged where they read them. */
  reads?: ArgumentKeys,
): JsonRpcMessage {
  const text = decodeBody(body, contentType)
  // The fast scan crosses what is never judged (strict-json.ts `fast`) and JSON.parse checks the
  // syntax. The fast scan reads valid JSON exactly as the strict one does, so a body both accept
  // is judged on the same keys; anything else, a batch included, is read again strictly, whose
  // first defect in text order names the refusal.
  let rawId: string | undefined
  let value: unknown
  let read = false
  try {
    const scan = scanJson(text, { maxDepth, fast: true, allKeys, reads })
    if (!scan.isArray) {
      rawId = scan.rawId
      value = JSON.parse(text)
      read = true
    }
  } catch {
    // read again below
  }
  if (!read) ({ rawId, value } = readStrictly(text, maxDepth, allKeys, reads))
  return checkShape(value, rawId)
}

/** The strict scan, then JSON.parse: refuses with the reason of the body's first defect. */
function readStrictly(
  text: string,
  maxDepth: number,
  allKeys: boolean,
  reads: ArgumentKeys | undefined,
): { rawId: string | undefined; value: unknown } {
  let rawId: string | undefined
  try {
    const scan = scanJson(text, { maxDepth, allKeys, reads })
    if (scan.isArray) throw new GatewayError('batch_not_supported')
    rawId = scan.rawId
  } catch (err) {
    if (!(err instanceof JsonScanError)) throw err
    if (err.kind === 'syntax') throw new GatewayError('parse_error')
    if (err.kind === 'too_deep') throw new GatewayError('json_too_deep', err.message)
    throw new GatewayError(err.kind, err.message)
  }
  try {
    return { rawId, value: JSON.parse(text) }
  } catch {
    // The scanner accepts only what JSON.parse accepts; this is the belt to its braces.
    throw new GatewayError('parse_error')
  }
}

/**
 * The body as text, only when it is UTF-8 without a byte order mark (RFC 8259 §8.1: JSON between
 * systems MUST be UTF-8, and a BOM MUST NOT be added). Anything else is refused rather than read
 * one way here and another way by a backend that honours a BOM, a charset or UTF-16.
 */
function decodeBody(body: Uint8Array, contentType: string | undefined): string {
  checkEncoding(body, contentType)
  try {
    return utf8.decode(body)
  } catch {
    throw new GatewayError('parse_error', 'the body is not valid UTF-8')
  }
}

/**
 * The checks of decodeBody that need no decoding (a few bytes and the media type), for bodies the
 * gateway forwards without parsing: refuses a BOM, UTF-16/32 and a charset other than UTF-8.
 */
export function checkEncoding(body: Uint8Array, contentType: string | undefined): void {
  // SECURITY: each of these is text that some reader decodes differently from this one.
  if (body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf) {
    throw new GatewayError(
      'parse_error',
      'the body starts with a byte order mark; send UTF-8 without one',
    )
  }
  if ((body[0] === 0xfe && body[1] === 0xff) || (body[0] === 0xff && body[1] === 0xfe)) {
    throw new GatewayError(
      'parse_error',
      'the body is UTF-16 or UTF-32 (byte order mark); send UTF-8',
    )
  }
  // RFC 4627 §3: JSON text starts with two ASCII characters, so a NUL among the first four bytes
  // means UTF-16 or UTF-32 without a BOM.
  if (body.length >= 2 && (body[0] === 0 || body[1] === 0 || body[2] === 0 || body[3] === 0)) {
    throw new GatewayError('parse_error', 'the body looks UTF-16 or UTF-32 encoded; send UTF-8')
  }
  if (contentType !== undefined && contentType.includes(';')) {
    const charset = charsetOf(contentType)
    if (charset !== undefined && charset !== 'utf-8') {
      throw new GatewayError(
        'parse_error',
        `charset ${JSON.stringify(charset)} is not supported; send UTF-8`,
      )
    }
  }
}

/** The lower-cased `charset` parameter of a media type (RFC 9110 §8.3.1), if there is one. */
function charsetOf(contentType: string): string | undefined {
  for (const param of contentType.split(';').slice(1)) {
    const eq = param.indexOf('=')
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue
    let value = param.slice(eq + 1).trim()
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"'))
      value = value.slice(1, -1)
    return value.toLowerCase()
  }
  return undefined
}

/** JSON-RPC 2.0 §4-5 shape; MCP adds: ids are strings or integers, never null (basic/index.mdx). */
function checkShape(value: unknown, rawId: string | undefined): JsonRpcMessage {
  if (!isRecord(value)) throw new GatewayError('invalid_request', 'body is not a JSON-RPC object')
  if (value.jsonrpc !== '2.0') throw new GatewayError('invalid_request', 'jsonrpc must be "2.0"')
  // SECURITY: `1.5`, `1e2` or `1e400` are read as 1.5, 100 or Infinity by one parser and kept as
  // text by another, so the answer's id would not be the request's; null, booleans, objects and
  // arrays are no MCP id at all.
  if (
    rawId !== undefined &&
    rawId.charCodeAt(0) !== 0x22 &&
    (!INTEGER_ID.test(rawId) || rawId === '-0')
  ) {
    throw new GatewayError(
      'invalid_id',
      `id ${rawId.length > 40 ? `${rawId.slice(0, 40)}…` : rawId} is not a string or an integer`,
    )
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

/**
 * A server's answer to a method it does not implement (JSON-RPC 2.0 §5.1, -32601), with the
 * request's id as the client wrote it and no gateway marker.
 */
export function methodNotFoundBody(rawId: string): string {
  return `{"jsonrpc":"2.0","id":${rawId},"error":{"code":-32601,"message":"Method not found"}}`
}
