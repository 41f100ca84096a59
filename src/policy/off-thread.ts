import { fileURLToPath } from 'node:url'
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads'
import type { LocatedProblem } from '../config/located.js'
import type { SourcedLimit } from '../limits/rules.js'
import type { SourcedRule } from './compile.js'

/**
 * Reading a large policy folder on a worker thread (docs/policy.md §What a rule costs): reading
 * and validating thousands of rules takes a good part of a second (seconds when a file has a
 * problem and the `yaml` parser places it), which on the serving thread would pause every request
 * for as long and leave its garbage in the gateway's heap. The worker (policy-worker.ts) runs load.ts's own reading and validation, so nothing is
 * judged differently, and sends back plain data: the validated rules and limits, or the problems.
 * The serving thread compiles the rules (compiled rules hold functions, which cannot be sent) as
 * each chunk arrives, so the plain copies die young: kept until the last chunk, every one of them
 * would be copied by each young-generation collection meanwhile, pausing requests for as long.
 */

/** What the worker sends, in this order: rules in chunks, then the rest, or why it failed. */
export type FolderMessage =
  | { readonly kind: 'rules'; readonly rules: readonly SourcedRule[] }
  | { readonly kind: 'done'; readonly limits: readonly SourcedLimit[]; readonly id: string }
  | { readonly kind: 'failed'; readonly problems: readonly LocatedProblem[] }
  | { readonly kind: 'crashed'; readonly message: string }

/** What the worker is started with. */
export interface FolderJob {
  /** load.ts PolicyLoadOptions (plain data). */
  readonly options: object
  readonly port: MessagePort
  /** Set to 1 once the last message is posted, for a caller that waits without its event loop. */
  readonly signal: Int32Array
  /**
   * Whether the worker yields the core to the threads serving requests (a reload); a start that
   * waits for it has nothing to yield to, and would only wait longer on a busy machine.
   */
  readonly yields: boolean
  /**
   * Chunks of rules taken in so far, when the reader paces the worker (a reload): the worker
   * posts a chunk only once the one before it was taken in. Node delivers every message queued on
   * a port in one task, so chunks posted all at once would be copied into this thread's heap in
   * one long pause, each young-generation collection meanwhile copying all of them again.
   * Undefined: posted at once (a start, which waits for the worker without reading the port).
   */
  readonly taken: Int32Array | undefined
}

/** A folder read off thread: its validated content, or the problems that refused it. */
export type FolderRead<R> =
  | {
      /** The rules as `take` made them, in file order. */
      readonly rules: readonly R[]
      readonly limits: readonly SourcedLimit[]
      readonly id: string
    }
  | { readonly problems: readonly LocatedProblem[] }

/** What the caller makes of each chunk of validated rules, as it arrives (compileRule). */
export type TakeRules<R> = (rules: readonly SourcedRule[]) => readonly R[]

/** How long a start waits for the worker before giving up (a 10,000-rule folder takes seconds). */
const SYNC_TIMEOUT_MS = 300_000

/**
 * Reads the folder on a worker and waits for it, blocking this thread (loadPolicySet given
 * `offThreadBytes`): the parser's garbage stays in the worker's heap, which is freed when it ends.
 */
export function readFolderWaiting<R>(options: object, take: TakeRules<R>): FolderRead<R> {
  const { worker, port, signal } = start(options, false, undefined)
  try {
    if (Atomics.wait(signal, 0, 0, SYNC_TIMEOUT_MS) === 'timed-out')
      throw new Error(`reading the policy folder took longer than ${SYNC_TIMEOUT_MS} ms`)
    const read = new Collected(take)
    for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port))
      if (read.add(m.message as FolderMessage)) break
    return read.result()
  } finally {
    port.close()
    void worker.terminate()
  }
}

/**
 * Reads the folder on a worker while this thread goes on serving (a reload): the rules arrive in
 * chunks, one at a time (FolderJob `taken`), each a short task for this thread to take in.
 */
export function readFolderBeside<R>(options: object, take: TakeRules<R>): Promise<FolderRead<R>> {
  const taken = new Int32Array(new SharedArrayBuffer(4))
  const { worker, port } = start(options, true, taken)
  const read = new Collected(take)
  return new Promise<FolderRead<R>>((resolve, reject) => {
    let settled = false
    const end = (settle: () => void): void => {
      if (settled) return
      settled = true
      port.close()
      worker.off('error', onError)
      // A worker that is still posting (the read failed here) would wait for chunks taken in.
      void worker.terminate()
      settle()
    }
    const onError = (err: Error): void => end(() => reject(err))
    const finish = (): void =>
      end(() => {
        try {
          resolve(read.result())
        } catch (err) {
          reject(err as Error)
        }
      })
    worker.once('error', onError)
    // Node hands over every message queued on the port in one task; taken in there, a large
    // folder's chunks would all be compiled in one long pause. Each is taken in a task of its own.
    const queue: FolderMessage[] = []
    let pumping = false
    let exited = false
    const pump = (): void => {
      const m = queue.shift()
      if (m === undefined) {
        pumping = false
        if (exited) finish()
        return
      }
      try {
        if (read.add(m)) return finish()
        // The worker may post the next chunk.
        Atomics.add(taken, 0, 1)
        Atomics.notify(taken, 0)
      } catch (err) {
        // `take` refused a chunk (a bug: the worker validated every rule): the read fails.
        return end(() => reject(err as Error))
      }
      setImmediate(pump)
    }
    const onMessage = (m: FolderMessage): void => {
      queue.push(m)
      if (!pumping) {
        pumping = true
        setImmediate(pump)
      }
    }
    port.on('message', onMessage)
    // A worker that ended (killed, out of memory) without a last message fails the read: what it
    // posted before is still in the port's queue.
    worker.once('exit', () => {
      if (settled) return
      for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port))
        onMessage(m.message as FolderMessage)
      exited = true
      if (!pumping) finish()
    })
  })
}

function start(
  options: object,
  yields: boolean,
  taken: Int32Array | undefined,
): { worker: Worker; port: MessagePort; signal: Int32Array } {
  const channel = new MessageChannel()
  const signal = new Int32Array(new SharedArrayBuffer(4))
  const job: FolderJob = { options, port: channel.port2, signal, yields, taken }
  const entry = new URL(
    `./policy-worker${fileURLToPath(import.meta.url).endsWith('.ts') ? '.ts' : '.js'}`,
    import.meta.url,
  )
  const worker = entry.pathname.endsWith('.ts')
    ? // Run from TypeScript sources (tests, tsx), the worker registers tsx's loader as its parent
      // did; the built gateway runs policy-worker.js as it is.
      new Worker(
        `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry.href)}) })`,
        { eval: true, workerData: job, transferList: [channel.port2] },
      )
    : new Worker(entry, { workerData: job, transferList: [channel.port2] })
  // The worker never keeps the gateway alive: a read nobody waits for is abandoned.
  worker.unref()
  return { worker, port: channel.port1, signal }
}

/** The worker's messages taken in as they come: rules made by `take`, then the end. */
class Collected<R> {
  private readonly rules: R[] = []
  private last: FolderMessage | undefined

  constructor(private readonly take: TakeRules<R>) {}

  /** Takes one message in; true once it was the last. */
  add(m: FolderMessage): boolean {
    if (this.last !== undefined) return true
    if (m.kind === 'rules') {
      for (const r of this.take(m.rules)) this.rules.push(r)
      return false
    }
    this.last = m
    return true
  }

  result(): FolderRead<R> {
    const m = this.last
    if (m === undefined) throw new Error('reading the policy folder ended without an answer')
    if (m.kind === 'done') return { rules: this.rules, limits: m.limits, id: m.id }
    if (m.kind === 'failed') return { problems: m.problems }
    throw new Error(
      `reading the policy folder failed: ${m.kind === 'crashed' ? m.message : m.kind}`,
    )
  }
}
