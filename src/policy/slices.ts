/**
 * Long work in steps (a generator that yields between steps): run at once where nothing else is
 * waiting (a start, `mcp-edge check`), or in slices of a few milliseconds where requests are
 * served meanwhile (a reload, docs/policy.md §Hot reload).
 */

/** Runs `steps` to its end at once. */
export function whole<T>(steps: Generator<void, T, void>): T {
  for (;;) {
    const next = steps.next()
    if (next.done === true) return next.value
  }
}

/**
 * Runs `steps` in slices of about `budgetMs`, letting the event loop run between slices (a
 * macrotask each, so pending I/O and timers go first).
 */
export async function sliced<T>(steps: Generator<void, T, void>, budgetMs = 3): Promise<T> {
  let until = performance.now() + budgetMs
  for (;;) {
    const next = steps.next()
    if (next.done === true) return next.value
    if (performance.now() >= until) {
      await new Promise((resolve) => setImmediate(resolve))
      until = performance.now() + budgetMs
    }
  }
}
