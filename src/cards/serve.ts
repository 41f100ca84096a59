import { CARD_MEDIA_TYPE, CATALOG_MEDIA_TYPE, type CardDocument, type CardSet } from './build.js'

/**
 * Answers for the card routes, without hono: a document, a 304 for a matching validator, or
 * nothing (the caller answers 404 as for an unknown server).
 */

/** A whole answer: status, headers and the bytes (empty for 304). */
export interface CardAnswer {
  readonly status: 200 | 304
  readonly headers: Readonly<Record<string, string>>
  readonly body: Buffer | undefined
}

/**
 * Headers the extension requires of hosted cards (docs/discovery.md §CORS Requirements): the
 * documents are public and read-only, so any origin may read them and revalidate them.
 */
export const CARD_CORS: Readonly<Record<string, string>> = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, HEAD',
  'access-control-allow-headers': 'Content-Type, If-None-Match',
  'access-control-expose-headers': 'ETag',
}

/** The card of `server`, exactly as configured; undefined when unknown, hidden or cards are off. */
export function cardAnswer(
  set: CardSet | undefined,
  server: string,
  ifNoneMatch: string | undefined,
): CardAnswer | undefined {
  // SECURITY: an exact Map lookup of the path segment: no name is ever turned into a pattern.
  const doc = set?.cards.get(server)
  return set === undefined || doc === undefined
    ? undefined
    : answer(doc, CARD_MEDIA_TYPE, set.cacheControl, ifNoneMatch)
}

/** The AI Catalog; undefined when cards are off. */
export function catalogAnswer(
  set: CardSet | undefined,
  ifNoneMatch: string | undefined,
): CardAnswer | undefined {
  return set === undefined
    ? undefined
    : answer(set.catalog, CATALOG_MEDIA_TYPE, set.cacheControl, ifNoneMatch)
}

function answer(
  doc: CardDocument,
  type: string,
  cacheControl: string,
  ifNoneMatch: string | undefined,
): CardAnswer {
  const headers = { etag: doc.etag, 'cache-control': cacheControl, ...CARD_CORS }
  if (ifNoneMatch !== undefined && matches(ifNoneMatch, doc.etag))
    return { status: 304, headers, body: undefined }
  return {
    status: 200,
    headers: {
      ...headers,
      'content-type': type,
      'content-length': String(doc.body.length),
      'x-content-type-options': 'nosniff',
    },
    body: doc.body,
  }
}

/** Most entity tags a client may list in one If-None-Match; the rest are not looked at. */
const MAX_TAGS = 32

/**
 * RFC 9110 §13.1.2: `*`, or a list of entity tags compared weakly (a `W/` prefix is ignored).
 * Bounded: at most MAX_TAGS tags are compared, each by exact bytes.
 */
export function matches(header: string, etag: string): boolean {
  const value = header.trim()
  if (value === '*') return true
  let seen = 0
  for (const part of value.split(',')) {
    if (++seen > MAX_TAGS) return false
    let tag = part.trim()
    if (tag.startsWith('W/')) tag = tag.slice(2)
    if (tag === etag) return true
  }
  return false
}
