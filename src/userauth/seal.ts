import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  hkdfSync,
  randomBytes,
} from 'node:crypto'

/**
 * The keys derived from `userTokens.key` (32 bytes): one per use, so that a sealed value of one
 * kind can never be opened as another (RFC 5869 HKDF-SHA256, a distinct `info` each).
 */
export interface UserKeys {
  /** Token records at rest (AES-256-GCM). */
  readonly tokens: Buffer
  /** Connect links, connect flows and `requestState` (AES-256-GCM). */
  readonly links: Buffer
  /** Store names: a keyed hash of issuer and subject, so a store's keys name nobody (HMAC). */
  readonly names: Buffer
  /** A short, non-secret fingerprint of the key (status and `mcp-edge tokens list`). */
  readonly id: string
}

export function deriveKeys(base64: string): UserKeys {
  const ikm = Buffer.from(base64, 'base64')
  const derive = (info: string): Buffer =>
    Buffer.from(hkdfSync('sha256', ikm, Buffer.alloc(0), `mcp-edge userTokens ${info} v1`, 32))
  const id = createHash('sha256').update(derive('id')).digest('base64url').slice(0, 8)
  return { tokens: derive('tokens'), links: derive('links'), names: derive('names'), id }
}

const IV_BYTES = 12
const TAG_BYTES = 16

/**
 * AES-256-GCM over `plaintext` with `aad` authenticated: base64url of iv | ciphertext | tag. The
 * associated data binds a value to where it belongs (a record to its store name, a link to its
 * kind), so a sealed value copied elsewhere does not open.
 */
export function seal(key: Buffer, aad: string, plaintext: string): string {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, iv)
  cipher.setAAD(Buffer.from(aad, 'utf8'))
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url')
}

/**
 * The plaintext of a sealed value, or undefined when it does not open: another key (rotated or
 * wrong), another `aad`, or any change to it. Never throws on bad input.
 */
export function open(key: Buffer, aad: string, sealed: string): string | undefined {
  // SECURITY: only the base64url alphabet; Buffer.from would skip anything else silently.
  if (!/^[A-Za-z0-9_-]+$/.test(sealed)) return undefined
  const raw = Buffer.from(sealed, 'base64url')
  if (raw.length < IV_BYTES + TAG_BYTES) return undefined
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES))
    decipher.setAAD(Buffer.from(aad, 'utf8'))
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES))
    const body = raw.subarray(IV_BYTES, raw.length - TAG_BYTES)
    return Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8')
  } catch {
    return undefined
  }
}

/** HMAC-SHA256 of the parts (length-prefixed, so `a`+`bc` and `ab`+`c` differ), base64url. */
export function keyedName(key: Buffer, parts: readonly string[]): string {
  const mac = createHmac('sha256', key)
  for (const p of parts) mac.update(`${p.length}:${p}`)
  return mac.digest('base64url')
}

/** A random identifier: 32 bytes, base64url (256 bits: never guessed). */
export function randomId(): string {
  return randomBytes(32).toString('base64url')
}

/** SHA-256 of a value, base64url (a browser binding compared without keeping the value). */
export function digest(value: string): string {
  return createHash('sha256').update(value).digest('base64url')
}
