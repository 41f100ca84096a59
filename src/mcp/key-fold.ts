/**
 * A JSON key as the loosest reader the gateway defends against reads it (docs/security.md §What
 * the gateway reads in a body): cut at the first U+0000, as C readers end a string (cJSON and its
 * kin), then case-folded as Go's encoding/json matches struct fields (`foldName`:
 * `unicode.ToUpper(unicode.ToLower(r))` per rune, simple mappings, invalid UTF-16 read as U+FFFD).
 * Two keys some such reader takes for one have the same reader key. The fold is that of every
 * Unicode letter, not only ASCII: Go takes `CITTÀ` for `città` as it takes `Bcc` for `bcc`, and
 * the long s, the Kelvin sign and the dotted and dotless I for `s`, `k` and `i`. It is coarser
 * than cJSON's ASCII folding, so it covers that too.
 */

/** Runes folded so far (non-ASCII only); bounded, so a body of odd letters cannot grow it. */
const RUNES = new Map<number, string>()
const MAX_RUNES = 4096

/**
 * The key's reader key: the key itself when it is lower-case ASCII without NUL (no allocation),
 * else ASCII letters lower-cased and other letters folded. Folding keeps the UTF-16 length, so a
 * reader key is as long as the key up to its first NUL.
 */
export function readerKey(key: string): string {
  const n = key.length
  let i = 0
  for (; i < n; i++) {
    const c = key.charCodeAt(i)
    if (c === 0 || (c >= 0x41 && c <= 0x5a) || c >= 0x80) break
  }
  if (i === n) return key
  let out = key.slice(0, i)
  for (; i < n; i++) {
    const c = key.charCodeAt(i)
    if (c === 0) break
    if (c < 0x80) {
      out += c >= 0x41 && c <= 0x5a ? String.fromCharCode(c + 0x20) : key.charAt(i)
      continue
    }
    const high = c >= 0xd800 && c <= 0xdbff
    const low = key.charCodeAt(i + 1)
    if (high && low >= 0xdc00 && low <= 0xdfff) {
      out += foldRune(((c - 0xd800) << 10) + (low - 0xdc00) + 0x10000)
      i++
    } else if (c >= 0xd800 && c <= 0xdfff) {
      // A lone surrogate: Go decodes it as U+FFFD, so two keys that differ only there are one.
      out += '\ufffd'
    } else out += foldRune(c)
  }
  return out
}

/**
 * One rune as Go folds it: its simple lower-case mapping, then that one's simple upper-case
 * mapping (Unicode's UnicodeData.txt). JavaScript's String case mappings are the full ones; they
 * differ from the simple ones only where the full mapping has several code points (SpecialCasing:
 * `ß`, `ǰ`, the Greek iota subscripts …), where the simple one keeps the rune, except U+0130,
 * whose simple lower case is `i`. A rune that folds onto an ASCII letter reads as that letter in
 * lower case, as ASCII letters do above.
 */
function foldRune(cp: number): string {
  const known = RUNES.get(cp)
  if (known !== undefined) return known
  const rune = String.fromCodePoint(cp)
  let lower = rune.toLowerCase()
  if ([...lower].length !== 1) lower = cp === 0x130 ? 'i' : rune
  let upper = lower.toUpperCase()
  if ([...upper].length !== 1) upper = lower
  const c = upper.charCodeAt(0)
  const folded =
    upper.length === 1 && c >= 0x41 && c <= 0x5a ? String.fromCharCode(c + 0x20) : upper
  if (RUNES.size < MAX_RUNES) RUNES.set(cp, folded)
  return folded
}
