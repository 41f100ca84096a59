const TIMEOUT: unique symbol = Symbol('fan-out deadline')

/** One member's part of a fan-out: its value, or why it was left out. */
export type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: unknown; readonly timedOut: boolean }

/**
 * The deadline of the member requests one client request causes (docs/virtual-servers.md
 * §Fan-out): made once per request and passed to each of its fan-outs, so that every page a
 * request reads, however many rounds, is done by then (never one deadline per page).
 */
export function fanOutDeadline(timeoutMs: number): AbortSignal {
  return AbortSignal.timeout(timeoutMs)
}

/**
 * Asks every member at once and waits no longer than `deadline` (docs/virtual-servers.md
 * §Fan-out): a member that has not answered by then is left out of this answer and its request
 * aborted through `signal`, so one slow member never holds up the others (nor fails them).
 */
export async function fanOut<T>(
  members: readonly number[],
  deadline: AbortSignal,
  ask: (member: number, signal: AbortSignal) => Promise<T>,
): Promise<Outcome<T>[]> {
  const ctl = new AbortController()
  const stop = (): void => ctl.abort()
  // SECURITY: the request's one deadline bounds this round too (a later round gets what is left).
  if (deadline.aborted) ctl.abort()
  else deadline.addEventListener('abort', stop, { once: true })
  const timeout = new Promise<typeof TIMEOUT>((resolve) => {
    if (ctl.signal.aborted) resolve(TIMEOUT)
    else ctl.signal.addEventListener('abort', () => resolve(TIMEOUT), { once: true })
  })
  try {
    return await Promise.all(
      members.map(async (m): Promise<Outcome<T>> => {
        try {
          if (ctl.signal.aborted) return { ok: false, error: undefined, timedOut: true }
          const value = await Promise.race([ask(m, ctl.signal), timeout])
          if (value === TIMEOUT) return { ok: false, error: undefined, timedOut: true }
          return { ok: true, value }
        } catch (error) {
          return { ok: false, error, timedOut: deadline.aborted }
        }
      }),
    )
  } finally {
    deadline.removeEventListener('abort', stop)
    ctl.abort() // nothing is still running after the answer: stragglers are cancelled
  }
}
