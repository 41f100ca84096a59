const TIMEOUT: unique symbol = Symbol('fan-out deadline')

/** One member's part of a fan-out: its value, or why it was left out. */
export type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: unknown; readonly timedOut: boolean }

/**
 * Asks every member at once and waits no longer than `timeoutMs` (docs/virtual-servers.md
 * §Fan-out): a member that has not answered by then is left out of this answer and its request
 * aborted through `signal`, so one slow member never holds up the others (nor fails them).
 */
export async function fanOut<T>(
  members: readonly number[],
  timeoutMs: number,
  ask: (member: number, signal: AbortSignal) => Promise<T>,
): Promise<Outcome<T>[]> {
  const ctl = new AbortController()
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<typeof TIMEOUT>((resolve) => {
    timer = setTimeout(() => {
      ctl.abort()
      resolve(TIMEOUT)
    }, timeoutMs)
  })
  try {
    return await Promise.all(
      members.map(async (m): Promise<Outcome<T>> => {
        try {
          const value = await Promise.race([ask(m, ctl.signal), deadline])
          if (value === TIMEOUT) return { ok: false, error: undefined, timedOut: true }
          return { ok: true, value }
        } catch (error) {
          return { ok: false, error, timedOut: ctl.signal.aborted }
        }
      }),
    )
  } finally {
    clearTimeout(timer)
    ctl.abort() // nothing is still running after the answer: stragglers are cancelled
  }
}
