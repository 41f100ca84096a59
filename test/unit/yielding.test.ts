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

/** chrt is there to set the class (util-linux on the CI image). */
const hasChrt = spawnSync('chrt', ['--help'], { stdio: 'ignore' }).status === 0

/**
 * Runs yieldThisProcess() in a process of its own, after starting a worker thread (threads that
 * were there before the call), and prints what it said and the class and nice value of every
 * thread, read from /proc (proc(5): `policy` 5 is SCHED_IDLE, 0 SCHED_OTHER), with one thread
 * started after the call.
 */
const READER = `
  import { readdirSync, readFileSync } from 'node:fs'
  import { Worker } from 'node:worker_threads'
  import { yieldThisProcess } from './src/yielding.ts'
  const stat = (tid) => {
    const s = readFileSync('/proc/self/task/' + tid + '/stat', 'utf8')
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
    return { nice: Number(f[16]), policy: Number(f[38]) }
  }
  const before = new Worker('setInterval(() => {}, 1000)', { eval: true })
  await new Promise((resolve) => before.once('online', resolve))
  const said = yieldThisProcess()
  const after = new Worker('setInterval(() => {}, 1000)', { eval: true })
  await new Promise((resolve) => after.once('online', resolve))
  const threads = readdirSync('/proc/self/task').map(stat)
  console.log(JSON.stringify({ said, threads }))
  await Promise.all([before.terminate(), after.terminate()])
`

interface Reader {
  readonly said: string
  readonly threads: readonly { readonly nice: number; readonly policy: number }[]
}

describe.runIf(process.platform === 'linux')('yieldThisProcess', () => {
  it.runIf(hasChrt)('puts every thread of the process in the idle class, ten below', () => {
    const r = inProcess(READER) as Reader
    expect(r.said).toBe('idle')
    // The main thread, V8's platform threads, libuv's pool and two workers at least.
    expect(r.threads.length).toBeGreaterThanOrEqual(6)
    expect(r.threads.every((t) => t.nice === 10 && t.policy === 5)).toBe(true)
  })

  it('keeps the nice value alone where chrt is missing', () => {
    const r = inProcess(`process.env.PATH = '/nonexistent'\n${READER}`) as Reader
    expect(r.said).toBe('nice')
    expect(r.threads.every((t) => t.nice === 10 && t.policy === 0)).toBe(true)
  })
})
