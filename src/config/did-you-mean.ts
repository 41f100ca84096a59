/**
 * "Did you mean" for unknown keys of the config and policy files: the known key at that place
 * closest to the one written (`trustHeader` → `trustHeaders`), from the zod schema that refused it,
 * so the suggestion can never name a key the schema would refuse too.
 */

/** The parts of a zod 4 schema's definition (`schema._zod.def`) that say which keys it takes. */
interface SchemaDef {
  readonly type: string
  readonly shape?: Readonly<Record<string, Schema>>
  readonly innerType?: Schema
  readonly in?: Schema
  readonly element?: Schema
  readonly valueType?: Schema
  readonly options?: readonly Schema[]
  readonly left?: Schema
  readonly right?: Schema
  readonly getter?: () => Schema
}
interface Schema {
  readonly _zod: { readonly def: SchemaDef }
}

/** Wrappers that hold one schema and add nothing to the keys it takes. */
const WRAPPERS = new Set(['optional', 'nullable', 'default', 'prefault', 'catch', 'readonly'])
/** How deep a walk goes through lazy schemas and wrappers before it gives up. */
const MAX_STEPS = 64

/** The object schemas a value at `path` may be checked against (several under a union). */
function objectsAt(schema: Schema, path: readonly PropertyKey[]): Schema[] {
  let here = [schema]
  for (const step of [...path, undefined]) {
    const objects: Schema[] = []
    const queue = [...here]
    let steps = 0
    while (queue.length > 0 && steps++ < MAX_STEPS * 4) {
      const s = queue.shift() as Schema
      const def = s._zod.def
      if (WRAPPERS.has(def.type) && def.innerType !== undefined) queue.push(def.innerType)
      else if (def.type === 'pipe' && def.in !== undefined) queue.push(def.in)
      else if (def.type === 'lazy' && def.getter !== undefined) queue.push(def.getter())
      else if (def.type === 'union' && def.options !== undefined) queue.push(...def.options)
      else if (def.type === 'intersection' && def.left && def.right) queue.push(def.left, def.right)
      else objects.push(s)
    }
    if (step === undefined) return objects.filter((s) => s._zod.def.type === 'object')
    here = objects.flatMap((s) => {
      const def = s._zod.def
      if (def.type === 'object' && typeof step === 'string') {
        const next = def.shape?.[step]
        return next === undefined ? [] : [next]
      }
      if (def.type === 'array' && typeof step === 'number' && def.element) return [def.element]
      if (def.type === 'record' && def.valueType) return [def.valueType]
      return []
    })
  }
  return []
}

/** The keys an object at `path` of `schema` takes. */
export function knownKeys(schema: unknown, path: readonly PropertyKey[]): string[] {
  const keys = new Set<string>()
  for (const o of objectsAt(schema as Schema, path))
    for (const k of Object.keys(o._zod.def.shape ?? {})) keys.add(k)
  return [...keys]
}

/**
 * The candidate closest to `word`, when it is close enough to be a slip: the same word in another
 * case, or at most one edit per four characters (one to three; none below three characters), counting a swap of
 * two neighbours as one (Damerau–Levenshtein, optimal string alignment).
 */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined
  let bestDistance = Infinity
  for (const c of candidates) {
    if (c === word) continue
    if (c.toLowerCase() === word.toLowerCase()) return c
    const d = editDistance(word, c)
    if (d < bestDistance) {
      best = c
      bestDistance = d
    }
  }
  // A word of one or two characters is too short for any edit to be a slip rather than another word.
  const allowed = word.length < 3 ? 0 : Math.min(3, Math.max(1, Math.floor(word.length / 4)))
  return bestDistance <= allowed ? best : undefined
}

/** ` (did you mean x?)` when a candidate is close, else ''. */
export function suggestion(word: string, candidates: Iterable<string>): string {
  const c = closest(word, candidates)
  return c === undefined ? '' : ` (did you mean ${c}?)`
}

function editDistance(a: string, b: string): number {
  const rows = a.length + 1
  const cols = b.length + 1
  const d: number[] = new Array<number>(rows * cols).fill(0)
  const at = (i: number, j: number): number => d[i * cols + j] as number
  for (let i = 0; i < rows; i++) d[i * cols] = i
  for (let j = 0; j < cols; j++) d[j] = j
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let v = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, at(i - 2, j - 2) + 1)
      d[i * cols + j] = v
    }
  }
  return at(a.length, b.length)
}
