/**
 * SEP-2243 request-metadata headers (spec 2026-07-28, basic/transports/streamable-http §Request
 * Metadata). Header names are case-insensitive; values are case-sensitive and compared exactly.
 */

const SENTINEL_OPEN = '=?base64?'
const SENTINEL_CLOSE = '?='
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/
// Printable ASCII only; anything else must travel in the sentinel form (SEP-2243 §Encoding).
const PLAIN = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/
// ignoreBOM: a decoded value keeps a leading U+FEFF, so it is compared as the client encoded it
// instead of losing a character another decoder keeps.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * Decodes an `Mcp-Name` / `Mcp-Param-*` value: `=?base64?…?=` becomes its UTF-8 text (the markers
 * are case-sensitive), a plain value is returned as is. Returns undefined for a value that is
 * neither valid plain ASCII nor a valid sentinel, which the caller answers with -32020.
 */
export function decodeHeaderValue(raw: string): string | undefined {
  if (raw.startsWith(SENTINEL_OPEN) && raw.endsWith(SENTINEL_CLOSE)) {
    const b64 = raw.slice(SENTINEL_OPEN.length, raw.length - SENTINEL_CLOSE.length)
    if (!BASE64.test(b64)) return undefined
    try {
      return utf8.decode(Buffer.from(b64, 'base64'))
    } catch {
      return undefined
    }
  }
  return PLAIN.test(raw) ? raw : undefined
}

/**
 * Encodes a value for `Mcp-Name` / `Mcp-Param-*` (SEP-2243 §Encoding): plain printable ASCII as is,
 * anything else (and anything that would read as the sentinel) as `=?base64?…?=`. The inverse of
 * decodeHeaderValue.
 */
export function encodeHeaderValue(value: string): string {
  return PLAIN.test(value) && !value.startsWith(SENTINEL_OPEN)
    ? value
    : `${SENTINEL_OPEN}${Buffer.from(value, 'utf8').toString('base64')}${SENTINEL_CLOSE}`
}

/** Hop-by-hop headers (RFC 9110 §7.6.1) plus proxy credentials; never forwarded either way. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
  'http2-settings',
])
