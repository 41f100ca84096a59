/**
 * Strings that look like credentials, wherever they stand in a string value (docs/operations.md
 * "Audit log": what `redacted` finds). Each shape is a prefix or structure that issuers chose so
 * that leaked keys can be found by scanning, which is what this is. Every pattern is linear: one
 * literal prefix, then one character class with a bounded minimum and no nested quantifier, so a
 * crafted argument cannot make a scan backtrack.
 */

/** A named shape and the text it matches (global: every occurrence in a string). */
interface Shape {
  readonly name: string
  readonly pattern: RegExp
  /** A further test of a match, for a prefix that also starts ordinary words. */
  readonly check?: (match: string) => boolean
}

/** RFC 6750 §2.1 b64token characters, for a bearer credential after its scheme. */
const B64TOKEN = String.raw`[A-Za-z0-9\-._~+/]`

const SHAPES: readonly Shape[] = [
  // A PEM private key of any kind (RFC 7468 §10-11, and OpenSSH, EC, DSA, ENCRYPTED). A block cut
  // before its END line (a truncated body) is taken to the end of the string.
  {
    name: 'pem-private-key',
    pattern:
      /-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----(?:[^-]|-(?!----END ))*(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----)?/g,
  },
  // `Bearer <token>` (RFC 6750 §2.1), the scheme case-insensitive as HTTP auth schemes are
  // (RFC 9110 §11.1). At least 8 token characters: below that it is prose ("Bearer of").
  { name: 'bearer', pattern: new RegExp(String.raw`bearer\s{1,16}${B64TOKEN}{8,}=*`, 'gi') },
  // A JWS/JWT in compact form (RFC 7515 §7.1): a header that is a JSON object (`{"` is `eyJ`),
  // then payload and signature (empty for `alg: none`).
  { name: 'jwt', pattern: /eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g },
  // AWS access key ids: long-term (AKIA) and temporary (ASIA), 20 characters.
  { name: 'aws-access-key-id', pattern: /(?:AKIA|ASIA)[A-Z0-9]{16}/g },
  // GitHub tokens: personal, OAuth, user-to-server, server-to-server, refresh, fine-grained.
  { name: 'github', pattern: /(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/g },
  // Slack bot, app, user, refresh and legacy tokens, and app-level tokens.
  { name: 'slack', pattern: /(?:xox[abprs]-|xapp-)[A-Za-z0-9-]{10,}/g },
  // Stripe secret and restricted keys, live and test.
  { name: 'stripe', pattern: /(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}/g },
  // OpenAI (`sk-`, `sk-proj-`) and Anthropic (`sk-ant-`) API keys. Their random part mixes
  // upper case and digits, which slugs (`task-management-…`, `risk-…`) do not.
  {
    name: 'sk',
    pattern: /sk-[A-Za-z0-9_-]{20,}/g,
    check: (m) => /[A-Z]/.test(m) && /[0-9]/.test(m),
  },
  // Google API keys: `AIza` and 35 more characters.
  { name: 'google-api-key', pattern: /AIza[A-Za-z0-9_-]{35}/g },
]

/** The shortest text any shape matches: an unsigned JWT (`eyJ`, 8, `.`, 1, `.`). */
const MIN_SHAPE_LENGTH = 14
/** The fixed part of every shape; a string without one holds no shape. */
const TRIGGERS =
  /-----BEGIN |[Bb][Ee][Aa][Rr][Ee][Rr]\s|eyJ|AKIA|ASIA|gh[pousr]_|github_pat_|xox[abprs]-|xapp-|k_(?:live|test)_|sk-|AIza/

/**
 * Runs of base64 or base64url characters this long that mix cases and digits and are this varied
 * (Shannon entropy per character) are taken for generated secrets: an AWS secret access key (40
 * characters), most vendors' keys, session secrets. Measured on random 40-character base64 strings,
 * 99.9 % are above 4.35 bits; camelCase identifiers and paths of that length are below 4.3.
 * Hex-only runs (digests, commit ids, UUIDs without dashes) are identifiers and are left alone.
 */
const GENERIC_MIN_LENGTH = 40
const GENERIC_MIN_BITS = 4.3
const GENERIC_RUN = /[A-Za-z0-9+/_-]{40,}={0,2}/g

/** Whether a run of base64 characters is varied enough to be taken for a generated secret. */
export function looksGenerated(run: string): boolean {
  if (run.length < GENERIC_MIN_LENGTH) return false
  if (!/[a-z]/.test(run) || !/[A-Z]/.test(run) || !/[0-9]/.test(run)) return false
  const counts = new Map<number, number>()
  for (let i = 0; i < run.length; i++) {
    const c = run.charCodeAt(i)
    counts.set(c, (counts.get(c) ?? 0) + 1)
  }
  let bits = 0
  for (const n of counts.values()) {
    const p = n / run.length
    bits -= p * Math.log2(p)
  }
  return bits >= GENERIC_MIN_BITS
}

/**
 * `text` with every credential-shaped part replaced by `mark(part)`; the same string when there is
 * none. Named shapes first (a bearer's JWT is one part), then the generic runs of what is left.
 */
export function redactText(text: string, mark: (secret: string) => string): string {
  // Most strings (names, short values) are too short for any shape, and most longer ones hold
  // none of the shapes' fixed parts: one scan decides for them, not one per shape.
  if (text.length < MIN_SHAPE_LENGTH) return text
  let out = text
  if (TRIGGERS.test(text)) {
    for (const { pattern, check } of SHAPES) {
      out = out.replace(pattern, check === undefined ? mark : (m) => (check(m) ? mark(m) : m))
    }
  }
  if (out.length < GENERIC_MIN_LENGTH) return out
  GENERIC_RUN.lastIndex = 0
  return out.replace(GENERIC_RUN, (run) => (looksGenerated(run) ? mark(run) : run))
}
