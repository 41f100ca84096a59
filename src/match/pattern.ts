/**
 * Name patterns of policy files. `*` matches any run of characters (including none); every other
 * character matches itself exactly. No case folding, no Unicode normalisation, no other wildcard:
 * tool names are case-sensitive (server/tools.mdx) and SEP-2243 compares names byte for byte, so
 * `Search`, `search ` and `ｓearch` never match `search`
 * (docs/policy.md).
 *
 * Strings are compared as UTF-16 code units, which for the well-formed text JSON and decoded
 * headers carry is the same as comparing their UTF-8 bytes.
 */

/** A compiled pattern or pattern list. */
export type Matcher = (value: string) => boolean

/** Matches nothing: a rule without patterns for a kind says nothing about that kind. */
const MATCH_NONE: Matcher = () => false

/** Compiles one pattern. No RegExp: a plain scan has no escaping mistakes and no backtracking. */
export function compilePattern(pattern: string): Matcher {
  if (!pattern.includes('*')) return (value) => value === pattern
  const parts = pattern.split('*')
  const head = parts[0] ?? ''
  const tail = parts[parts.length - 1] ?? ''
  const middle = parts.slice(1, -1).filter((p) => p.length > 0)
  if (head === '' && tail === '' && middle.length === 0) return () => true
  return (value) => {
    if (value.length < head.length + tail.length) return false
    if (!value.startsWith(head) || !value.endsWith(tail)) return false
    // Leftmost match of each literal segment is enough: `*` is the only wildcard, so taking the
    // earliest occurrence never rules out a match that a later one would allow.
    const end = value.length - tail.length
    let pos = head.length
    for (const segment of middle) {
      const at = value.indexOf(segment, pos)
      if (at === -1 || at + segment.length > end) return false
      pos = at + segment.length
    }
    return true
  }
}

/** Compiles a pattern list into one matcher: exact names in a Set, the rest scanned in turn. */
export function compilePatterns(patterns: readonly string[] | undefined): Matcher {
  if (patterns === undefined || patterns.length === 0) return MATCH_NONE
  const exact = new Set<string>()
  const globs: Matcher[] = []
  for (const p of patterns) {
    if (p === '*') return () => true
    if (p.includes('*')) globs.push(compilePattern(p))
    else exact.add(p)
  }
  if (globs.length === 0) return (value) => exact.has(value)
  return (value) => exact.has(value) || globs.some((g) => g(value))
}
