import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../../', import.meta.url))

/**
 * Runs `script` in a process of its own (src/yielding.ts changes the priority of the process's
 * threads, which must not be the test runner's), started under `nice` when `niceness` is given,
 * and returns the JSON it printed.
 */
function inProcess(script: string, niceness?: number): unknown {
  const node = [process.execPath, '--import', 'tsx', '--input-type=module', '-e', script]
  const [cmd, ...args] = niceness === undefined ? node : ['nice', '-n', String(niceness), ...node]
  const r = spawnSync(cmd as string, args, { cwd: root, encoding: 'utf8', timeout: 30_000 })
  if (r.status !== 0) throw new Error(r.stderr)
  return JSON.parse(r.stdout) as unknown
}

/** Prints the nice value of the serving thread and of every other thread, after `before`. */
const THREADS = (before: string): string => `
  import { readdirSync } from 'node:fs'
  import { getPriority, setPriority } from 'node:os'
  import { yieldOtherThreads } from './src/yielding.ts'
  const others = () => readdirSync('/proc/self/task').map(Number).filter((t) => t !== process.pid)
  ${before}
  const lowered = await yieldOtherThreads()
  console.log(JSON.stringify({
    lowered,
    serving: getPriority(),
    others: Object.fromEntries(others().map((t) => [t, getPriority(t)])),
  }))
`

interface Threads {
  readonly lowered: number
  readonly serving: number
  readonly others: Record<string, number>
}

describe.runIf(process.platform === 'linux')('yieldOtherThreads', () => {
  it('lowers every thread but the serving one to ten below it', () => {
    const r = inProcess(THREADS('')) as Threads
    const others = Object.values(r.others)
    // V8's platform threads and libuv's pool at least.
    expect(others.length).toBeGreaterThanOrEqual(4)
    expect(others.every((n) => n === Math.min(19, r.serving + 10))).toBe(true)
    expect(r.lowered).toBe(others.length)
  })

  it('only ever lowers: a thread already lower stays, and 19 is the floor', () => {
    const r = inProcess(
      THREADS(
        `const first = others()[0]; setPriority(first, 19); globalThis.first = first`,
      ).replace('lowered,', 'lowered, first: globalThis.first,'),
    ) as Threads & { first: number }
    expect(r.others[r.first]).toBe(19)
    expect(r.lowered).toBe(Object.keys(r.others).length - 1)
    // Started at nice 15, the others go to 19, not 25.
    const niced = inProcess(THREADS(''), 15) as Threads
    expect(niced.serving).toBe(15)
    expect(Object.values(niced.others).every((n) => n === 19)).toBe(true)
  })
})
