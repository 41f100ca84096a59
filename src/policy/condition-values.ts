/**
 * Turning a call's parsed JSON into CEL values (docs/policy.md §Conditions): objects become maps,
 * arrays lists, numbers doubles (JSON numbers are CEL doubles, cel-spec langdef.md §JSON Data
 * Conversion), strings, booleans and null themselves. Iterative, so a deep body cannot overflow
 * the stack, and bounded: more than MAX_VALUES values is refused rather than converted.
 */

/** Values (containers, keys excluded, and scalars) one condition input may hold. */
export const MAX_VALUES = 10_000

/** Why a call's input cannot be given to a condition; a condition over it denies. */
export class ConditionInputError extends Error {
  override readonly name = 'ConditionInputError'
}

/** The converted input and its size, which the cost estimate reads. */
export interface CelInputValue {
  readonly value: unknown
  /** Values converted (containers and scalars). */
  readonly values: number
  /** UTF-16 code units of every string and key. */
  readonly chars: number
}

// A lone surrogate is no Unicode scalar value: a CEL string cannot hold it (langdef.md §Strings),
// and the backend may decode it as U+FFFD, so the condition would judge another text.
const LONE_SURROGATE = /\p{Surrogate}/u

type Container = Map<string, unknown> | unknown[]

/** Converts `root`; `budget` is what is left of MAX_VALUES (shared by every input of a call). */
export function toCelValue(root: unknown, budget = MAX_VALUES): CelInputValue {
  let values = 0
  let chars = 0
  const top: unknown[] = [undefined]
  const stack: Array<[unknown, Container, string | number]> = [[root, top, 0]]
  for (let slot = stack.pop(); slot !== undefined; slot = stack.pop()) {
    const [value, into, key] = slot
    // SECURITY: bounded before anything is allocated for the value.
    if (++values > budget)
      throw new ConditionInputError(`the input holds more than ${MAX_VALUES} values`)
    let out: unknown
    if (typeof value === 'string') {
      chars += value.length
      out = checkString(value)
    } else if (typeof value === 'number') {
      // SECURITY: JSON.parse rounds integers beyond 2^53 - 1; a rounded number would be judged
      // as another number than the backend reads, so the condition refuses the call instead.
      if (Math.abs(value) > Number.MAX_SAFE_INTEGER)
        throw new ConditionInputError('a number beyond ±(2^53 - 1) cannot be compared exactly')
      out = value
    } else if (typeof value === 'boolean' || value === null) {
      out = value
    } else if (Array.isArray(value)) {
      const list: unknown[] = new Array<unknown>(value.length)
      for (let i = value.length - 1; i >= 0; i--) stack.push([value[i], list, i])
      out = list
    } else if (typeof value === 'object') {
      const map = new Map<string, unknown>()
      // Own keys only: JSON.parse makes `__proto__` an own key, a plain key like any other.
      for (const k of Object.keys(value)) {
        chars += k.length
        map.set(checkString(k), undefined)
        stack.push([(value as Record<string, unknown>)[k], map, k])
      }
      out = map
    } else {
      throw new ConditionInputError(`a ${typeof value} is no JSON value`)
    }
    if (Array.isArray(into)) into[key as number] = out
    else into.set(key as string, out)
  }
  return { value: top[0], values, chars }
}

function checkString(s: string): string {
  if (LONE_SURROGATE.test(s))
    throw new ConditionInputError('a string holds an unpaired surrogate (no Unicode text)')
  return s
}
