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
 * Runs yieldThisThread() on a worker thread of a process of its own and prints what it said,
 * and the class and nice value of that thread and of the serving one, read from /proc
 * (proc(5): `policy` 5 is SCHED_IDLE, 0 SCHED_OTHER).
 */
const READER = `
  import { readFileSync } from 'node:fs'
  import { Worker } from 'node:worker_threads'
  const stat = (tid) => {
    const s = readFileSync('/proc/self/task/' + tid + '/stat', 'utf8')
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ')
    return { nice: Number(f[16]), policy: Number(f[38]) }
  }
  const worker = new Worker(\`
    import('tsx/esm/api').then((m) => { m.register(); return import('./src/yielding.ts') }).then(async (y) => {
      const said = y.yieldThisThread()
      const tid = (await import('node:fs')).readlinkSync('/proc/thread-self').split('/').pop()
      ;(await import('node:worker_threads')).parentPort.postMessage({ said, tid })
    })\`, { eval: true })
  const { said, tid } = await new Promise((resolve) => worker.once('message', resolve))
  console.log(JSON.stringify({ said, reader: stat(tid), serving: stat(process.pid) }))
  await worker.terminate()
`

interface Reader {
  readonly said: string
  readonly reader: { readonly nice: number; readonly policy: number }
  readonly serving: { readonly nice: number; readonly policy: number }
}

describe.runIf(process.platform === 'linux')('yieldThisThread', () => {
  it.runIf(hasChrt)('puts the calling thread in the idle class, ten below, alone', () => {
    const r = inProcess(READER) as Reader
    expect(r.said).toBe('idle')
    expect(r.reader).toEqual({ nice: 10, policy: 5 })
    expect(r.serving).toEqual({ nice: 0, policy: 0 })
  })

  it('keeps the nice value alone where chrt is missing', () => {
    const r = inProcess(`process.env.PATH = '/nonexistent'\n${READER}`) as Reader
    expect(r.said).toBe('nice')
    expect(r.reader).toEqual({ nice: 10, policy: 0 })
    expect(r.serving).toEqual({ nice: 0, policy: 0 })
  })
})
