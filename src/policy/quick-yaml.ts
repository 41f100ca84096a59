import { FAILSAFE_SCHEMA, load, Type } from 'js-yaml'

/**
 * A quick first read of a policy file (docs/policy.md §What a rule costs). The `yaml` package
 * that reads every config file keeps each node with its position, so that a problem can be shown
 * at its line and column; on a folder of thousands of rules that costs seconds (about 0.2 ms a
 * rule, most of a 10,000-rule gateway's start). js-yaml builds the plain values only, ten times
 * faster. A file it reads is taken from it; one it refuses, or one it cannot be trusted to read
 * as `yaml` does, is read by the `yaml` path as before (policy/load.ts), which reports problems
 * at their place. Problems are never judged from this reader: a file with any goes to `yaml`.
 *
 * It resolves plain scalars by the YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution),
 * as `yaml` does: `1_000`, `0b1` and `.5e` stay strings, `yes` and `on` stay strings.
 */

/** The core schema's plain scalars (YAML 1.2.2 §10.3.2), as `yaml`'s core schema has them. */
const NULL = /^(?:~|null|Null|NULL)?$/
const BOOL = /^(?:true|True|TRUE|false|False|FALSE)$/
/** `[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+` (YAML 1.2.2 §10.3.2). */
const INT = /^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$/
/** `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`, infinities, NaN. */
const FLOAT =
  /^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/

const nil = new Type('tag:yaml.org,2002:null', {
  kind: 'scalar',
  // js-yaml passes an empty plain scalar as null.
  resolve: (data: unknown) => data === null || (typeof data === 'string' && NULL.test(data)),
  construct: () => null,
  predicate: (x: unknown) => x === null,
})

const bool = new Type('tag:yaml.org,2002:bool', {
  kind: 'scalar',
  resolve: (data: unknown) => typeof data === 'string' && BOOL.test(data),
  construct: (data: string) => data.startsWith('t') || data.startsWith('T'),
  predicate: (x: unknown) => typeof x === 'boolean',
})

const int = new Type('tag:yaml.org,2002:int', {
  kind: 'scalar',
  resolve: (data: unknown) => typeof data === 'string' && INT.test(data),
  construct: (data: string) =>
    data.startsWith('0o')
      ? parseInt(data.slice(2), 8)
      : data.startsWith('0x')
        ? parseInt(data.slice(2), 16)
        : Number(data),
  predicate: (x: unknown) => typeof x === 'number' && Number.isInteger(x),
})

const float = new Type('tag:yaml.org,2002:float', {
  kind: 'scalar',
  resolve: (data: unknown) => typeof data === 'string' && FLOAT.test(data),
  construct: (data: string) => {
    const lower = data.toLowerCase()
    if (lower.endsWith('.nan')) return Number.NaN
    if (lower.endsWith('.inf')) return data.startsWith('-') ? -Infinity : Infinity
    return parseFloat(data)
  },
  predicate: (x: unknown) => typeof x === 'number',
})

/** YAML 1.2 core: strings, sequences and maps (failsafe) and the four above. */
const CORE = FAILSAFE_SCHEMA.extend({ implicit: [nil, bool, int, float] })

/** Map keys `yaml` reads otherwise (a null key becomes `""` there, `"null"` here). */
const NULL_KEYS = new Set(['', '~', 'null', 'Null', 'NULL'])

/**
 * The file's values, or undefined when the `yaml` path must read it: a syntax error, a duplicate
 * key, several documents, a tag other than the core ones (js-yaml throws on each), an anchor used
 * for a collection (`yaml` bounds how far aliases expand; here they would be shared objects), or a
 * key that would be null.
 */
export function quickYaml(text: string): unknown {
  let value: unknown
  try {
    value = load(text, { schema: CORE })
  } catch {
    return undefined
  }
  return plain(value, new Set()) ? value : undefined
}

/** Whether every collection under `value` is reached once and no map key could be null. */
function plain(value: unknown, seen: Set<object>): boolean {
  if (typeof value !== 'object' || value === null) return true
  if (seen.has(value)) return false
  seen.add(value)
  if (Array.isArray(value)) return value.every((v) => plain(v, seen))
  for (const [k, v] of Object.entries(value)) if (NULL_KEYS.has(k) || !plain(v, seen)) return false
  return true
}
