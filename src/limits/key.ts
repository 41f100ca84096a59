import { hash } from 'node:crypto'

/** Any UTF-16 surrogate: a string without one encodes to UTF-8 one way only. */
const SURROGATE = /[\ud800-\udfff]/

/**
 * The bucket a key value (a claim, a header, an address) is held under, in memory and in Redis: a
 * SHA-256 digest, 43 base64url characters, whatever the value's length.
 *
 * SECURITY: a limit keyed on what a client chooses (`header:<Name>`) must not let the client
 * choose how much memory a bucket takes (docs/rate-limits.md §Memory), and a key value (an API
 * key in a header) never reaches Redis as text. The digest is collision-resistant, so no value can
 * be picked to land in another caller's bucket. A value with a surrogate is hashed from its UTF-16
 * code units (UTF-8 would turn every lone surrogate into U+FFFD, so two values could share a
 * bucket), and marked so that it cannot equal the digest of another value: names are compared
 * byte for byte.
 */
export function bucketKey(value: string): string {
  if (!SURROGATE.test(value)) return hash('sha256', value, 'base64url')
  return `~${hash('sha256', Buffer.from(value, 'utf16le'), 'base64url')}`
}
