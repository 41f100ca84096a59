import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { onTestFinished } from 'vitest'

/** Awaits `start` and closes what it resolves to when the test ends, pass or fail. */
export async function closing<T extends { close(): Promise<unknown> }>(
  start: Promise<T>,
): Promise<T> {
  const value = await start
  onTestFinished(async () => {
    await value.close()
  })
  return value
}

/** The text blocks of a tool result (v1 and v2 result types alike), joined. */
export function textOf(result: object): string {
  const content: unknown = 'content' in result ? result.content : []
  if (!Array.isArray(content)) return ''
  return content.map((c: { text?: unknown }) => (typeof c.text === 'string' ? c.text : '')).join('')
}

/**
 * A full garbage collection now, as `--expose-gc` would give (the test runner starts without it):
 * for what must hold whenever the collector has run (a signal that follows another).
 */
export function collectGarbage(): void {
  setFlagsFromString('--expose-gc')
  ;(runInNewContext('gc') as () => void)()
}
