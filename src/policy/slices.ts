/**
 * Long work in steps (a generator that yields between steps): run at once where nothing else is
 * waiting (a start, `mcp-edge check`), or paced where requests are served meanwhile (a reload,
 * docs/policy.md §Hot reload).
 */

/** Runs `steps` to its end at once. */
export function whole<T>(steps: Generator<void, T, void>): T {
  for (;;) {
    const next = steps.next()
    if (next.done === true) return next.value
  }
}

/**
 * How a reload shares the serving thread: it works for `budgetMs`, then leaves the thread to
 * everything else for twice as long as that slice took (collections it caused included), so it
 * takes at most about a third of the thread however busy the gateway is. Yielding for one turn
 * of the event loop (setImmediate) is not enough: a forwarded request needs several turns (its
 * body, the upstream's head, its body, the answer), and a slice in each turn delays it by as
 * many slices; a timer lets every turn that is due in between run without one.
 */
export class Pacer {
  private started = performance.now()

  constructor(
    private readonly budgetMs = 1,
    private readonly restFactor = 2,
  ) {}

  /** Starts a slice now: after waiting for something other than `rest()`. */
  start(): void {
    this.started = performance.now()
  }

  /** Whether this slice's budget is spent: the caller should `rest()` before its next step. */
  due(): boolean {
    return performance.now() - this.started >= this.budgetMs
  }

  /** Leaves the thread to others, then starts the next slice. */
  async rest(): Promise<void> {
    const spent = performance.now() - this.started
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, spent * this.restFactor)))
    this.started = performance.now()
  }
}

/** Runs `steps` in slices paced by `pacer`. */
export async function sliced<T>(steps: Generator<void, T, void>, pacer: Pacer): Promise<T> {
  pacer.start()
  for (;;) {
    const next = steps.next()
    if (next.done === true) return next.value
    if (pacer.due()) await pacer.rest()
  }
}
