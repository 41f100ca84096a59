import type { SourcedRule } from './compile.js'
import { quickYaml } from './quick-yaml.js'
import { policyFileSchema, type RuleConfig } from './schema.js'

/**
 * An edit of a large policy file read again item by item (docs/policy.md §Hot reload). The reload's
 * reader keeps what each file held (load.ts KeptFiles); an edit of one rule of a 10,000-rule file
 * had it parse, validate and check the whole file again, about 110 ms of CPU beside the serving
 * thread. Here only the rule items whose text the edit touched are parsed, and the others are the
 * rules read before, at their new places.
 *
 * That is the file's own reading only where the items of its `rules:` sequence are read each on
 * its own (YAML 1.2.2 §8.2.1, block sequences): a file of comments, one `rules:` line and block
 * entries, each starting on a line of its own at the sequence's indentation, with nothing after
 * them, no alias (an alias in one item may name an anchor of another), and no line that breaks
 * the layout. Where any of that does not hold, or cannot be shown, the file is read in full, as
 * before: every condition below falls back, none decides.
 */

/** Where a file's rule items are: the entries of its `rules:` sequence. */
export interface RuleItems {
  /** The indentation of the sequence's entries (spaces). */
  readonly indent: string
  /** The offset of each entry's first line (its `- `), in rule order. */
  readonly starts: readonly number[]
}

/**
 * Comment and blank lines, one `rules:` line, comment and blank lines: all a file may hold before
 * its first rule item.
 */
const HEADER = /^(?:[ \t]*(?:#.*)?\n)*rules:(?:[ \t]+(?:#.*)?)?\n(?:[ \t]*(?:#.*)?\n)*/

/**
 * An alias, or text a conservative eye takes for one (`*` where a node can start; a plain scalar
 * cannot start with `*`, so patterns such as `get_*` and `"*"` are not): an alias in an item read
 * before may name an anchor the edit changed.
 */
const ALIAS = /(?:^|[ \t[{,])\*/m

/**
 * A tab in a line's indentation: YAML does not indent with tabs (§6.1), and an entry a lenient
 * parser took at a tab-indented line would not be counted as one here.
 */
const TAB_INDENT = /^ *\t/m

/** A line that starts an entry of a sequence indented `indent`: `- `, `-\t` or `-` alone. */
function entryLine(indent: string): RegExp {
  return new RegExp(`^${indent}-(?:[ \\t]|$)`, 'gm')
}

/**
 * A line that none of an item's lines can be: not blank, not a comment, not an entry, not
 * indented past the sequence (`...`, `---`, `limits:`, a second `rules:`).
 */
function strayLine(indent: string): RegExp {
  return new RegExp(`^(?![ \\t]*(?:#|$)|${indent}(?:-(?:[ \\t]|$)| ))`, 'm')
}

/**
 * Characters compared at once: a comparison of two slices is a compare of memory, where a loop
 * over characters took 5 ms of a 1.3 MB file.
 */
const RUN = 4096

/** How many characters `a` and `b` start with alike. */
function samePrefix(a: string, b: string): number {
  const most = Math.min(a.length, b.length)
  let p = 0
  while (p + RUN <= most && a.slice(p, p + RUN) === b.slice(p, p + RUN)) p += RUN
  while (p < most && a.charCodeAt(p) === b.charCodeAt(p)) p++
  return p
}

/** How many characters, at most `most`, `a` and `b` end with alike. */
function sameSuffix(a: string, b: string, most: number): number {
  let q = 0
  while (
    q + RUN <= most &&
    a.slice(a.length - q - RUN, a.length - q) === b.slice(b.length - q - RUN, b.length - q)
  )
    q += RUN
  while (q < most && a.charCodeAt(a.length - 1 - q) === b.charCodeAt(b.length - 1 - q)) q++
  return q
}

/** Whether an entry at `indent` starts at offset `at` (a line's start) of `text`. */
function entryAt(text: string, indent: string, at: number): boolean {
  const line = entryLine(indent)
  line.lastIndex = at
  return line.exec(text)?.index === at
}

/** The offsets in `text` of the lines that start an entry at `indent`. */
function entries(text: string, indent: string, from = 0): number[] {
  const line = entryLine(indent)
  line.lastIndex = from
  const at: number[] = []
  for (let m = line.exec(text); m !== null; m = line.exec(text)) at.push(m.index)
  return at
}

/**
 * Where the rule items of a file read as `rules` (and no limits) are, or undefined when it cannot
 * be read item by item. An entry-like line inside a quoted or block scalar would be taken for an
 * item: there are then more such lines than rules, and the file is refused.
 */
export function itemsOf(
  text: string,
  content: {
    readonly rules: readonly unknown[]
    readonly limits: readonly unknown[]
    /** Set when the `yaml` parser read the file (load.ts PolicyFileContent). */
    readonly source?: unknown
  },
): RuleItems | undefined {
  // SECURITY: edited items are parsed by the quick reader (quick-yaml.ts); a file it refused was
  // read by `yaml`, and so is the file after any edit that leaves it so. The two read some text
  // differently (a quoted scalar continued at its key's indentation: js-yaml takes it, `yaml`
  // refuses it), so the edited items would be read as the file is not.
  if (content.source !== undefined) return undefined
  // SECURITY: a line break YAML reads (`\r`) that the line scan below does not, an alias, or a
  // tab-indented line would let two readings of the file differ.
  if (content.limits.length > 0 || text.includes('\r') || ALIAS.test(text)) return undefined
  if (TAB_INDENT.test(text)) return undefined
  const header = HEADER.exec(text)
  if (header === null) return undefined
  const indent = /^ */.exec(text.slice(header[0].length))?.[0] ?? ''
  const starts = entries(text, indent, header[0].length)
  // SECURITY: as many entry lines as rules, the first straight after the header: each is an item.
  const items = starts.length === content.rules.length && starts[0] === header[0].length
  return items && strayLine(indent).test(text.slice(header[0].length)) === false
    ? { indent, starts }
    : undefined
}

/** A file's rules read again after an edit, and where its items now are. */
export interface EditRead {
  readonly rules: SourcedRule[]
  readonly items: RuleItems
}

/**
 * The rules of `text`, an edit of `before.text`, read again item by item: the items from the one
 * the edit's first change is in to the one its last is in are parsed and validated (with the
 * file's header, as a file of their own); the others are `before`'s rules, named by their new
 * places. Undefined when the edited items do not read as items on their own: the file is then
 * read in full.
 */
export function readEdit(
  before: {
    readonly text: string
    readonly rules: readonly SourcedRule[]
    readonly items: RuleItems
  },
  text: string,
  label: string,
): EditRead | undefined {
  const old = before.text
  const { indent, starts } = before.items
  const n = starts.length
  const head = starts[0] as number
  // The edit spans [p, e0) of the old text and [p, e1) of the new one; the rest is the same.
  let p = samePrefix(old, text)
  // From the start of the line the first change is on, so that an item added before another is
  // read alone, not with the one it was put before.
  if (p > 0) p = old.lastIndexOf('\n', p - 1) + 1
  const q = sameSuffix(old, text, Math.min(old.length, text.length) - p)
  const e0 = old.length - q
  const e1 = text.length - q
  // An edit before the first item (the header, or the `rules:` line itself) is read in full.
  if (p < head) return undefined
  // From the item the first change is in; or the one before it, when the change starts at an
  // item's first line with a line that starts none (lines added to the end of the one before).
  let a = 0
  while (a + 1 < n && (starts[a + 1] as number) <= p) a++
  if (a > 0 && starts[a] === p && !entryAt(text, indent, p)) a--
  // To the first item whose whole text is after the last change.
  let z = a
  while (z < n && (starts[z] as number) < e0) z++
  const shift = e1 - e0
  const end = z < n ? (starts[z] as number) + shift : text.length
  // SECURITY: the untouched items start on lines of their own in the new text too.
  if (z < n && end > 0 && text.charCodeAt(end - 1) !== 10) return undefined
  const from = starts[a] as number
  const region = text.slice(from, end)
  // SECURITY: the edited items hold nothing that could reach outside them (see itemsOf), and no
  // line that could end the sequence.
  if (region.includes('\r') || ALIAS.test(region) || TAB_INDENT.test(region)) return undefined
  if (strayLine(indent).test(region)) return undefined
  const local = entries(region, indent)
  let fresh: readonly RuleConfig[] = []
  if (region.length > 0) {
    // The edited text starts at an item (a comment put before the first item is read in full).
    if (local[0] !== 0) return undefined
    // SECURITY: it reads, with the header, as exactly as many rules as it has entry lines: no
    // entry-like line is inside a scalar, and no scalar or flow collection runs on past its end
    // into the items after it.
    const parsed = policyFileSchema.safeParse(quickYaml(old.slice(0, head) + region))
    if (!parsed.success || parsed.data.limits !== undefined) return undefined
    if (parsed.data.rules?.length !== local.length) return undefined
    fresh = parsed.data.rules
  } else if (a === 0 && z === n) {
    // Every rule removed: `rules:` alone is a problem a full read places.
    return undefined
  }
  const rules = before.rules.slice(0, a)
  for (const rule of fresh) rules.push({ rule, source: `${label} rules[${rules.length}]` })
  for (let k = z; k < n; k++) {
    const kept = before.rules[k] as SourcedRule
    const at = rules.length
    rules.push(at === k ? kept : { rule: kept.rule, source: `${label} rules[${at}]` })
  }
  const moved = starts.slice(z).map((s) => s + shift)
  return {
    rules,
    items: { indent, starts: [...starts.slice(0, a), ...local.map((s) => s + from), ...moved] },
  }
}
