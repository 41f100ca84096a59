import { createHash, randomBytes } from 'node:crypto'

/**
 * RFC 7636 PKCE with S256 (§4.1, §4.2): a 43-character verifier of 32 random bytes, and its
 * challenge BASE64URL(SHA256(verifier)). The verifier never leaves the gateway's store; only the
 * challenge goes through the browser.
 */
export function pkcePair(): { readonly verifier: string; readonly challenge: string } {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}
