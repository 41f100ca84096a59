import { fileURLToPath } from 'node:url'
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads'
import type { LocatedProblem } from '../config/located.js'
import type { SourcedLimit } from '../limits/rules.js'
import type { SourcedRule } from './compile.js'
import type { RunningList } from './running-rules.js'
import type { Pacer } from './slices.js'

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

/**
 * What the worker sends, in this order: rules in chunks, then the rest, or why it failed. A rule
 * unchanged from a running one (FolderJob `running`) is sent as that rule's place in the list.
 */
export type FolderMessage =
  | { readonly kind: 'rules'; readonly rules: readonly (SourcedRule | number)[] }
  | { readonly kind: 'done'; readonly limits: readonly SourcedLimit[]; readonly id: string }
  | { readonly kind: 'failed'; readonly problems: readonly LocatedProblem[] }
  | { readonly kind: 'crashed'; readonly message: string }

/** One read, posted to the worker (policy-worker.ts), which answers on `port`. */
export interface FolderJob {
  /** load.ts PolicyLoadOptions (plain data). */
  readonly options: object
  readonly port: MessagePort
  /** Set to 1 once the last message is posted, for a caller that waits without its event loop. */
  readonly signal: Int32Array
  /**
   * Chunks of rules taken in so far, when the reader paces the worker (a reload): the worker
   * posts a chunk only once the one before it was taken in. Node delivers every message queued on
   * a port in one task, so chunks posted all at once would be copied into this thread's heap in
   * one long pause, each young-generation collection meanwhile copying all of them again.
   * Undefined: posted at once (a start, which waits for the worker without reading the port).
   */
  readonly taken: Int32Array | undefined
  /** The rules of the policy a reload replaces (running-rules.ts); undefined: none. */
  readonly running: RunningList | undefined
}

/** What the worker is started with. */
export interface ReaderSetup {
  /**
   * Whether the worker yields the core to the threads serving requests (a reload); a start that
   * waits for it has nothing to yield to, and would only wait longer on a busy machine.
   */
  readonly yields: boolean
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

/** What the caller makes of each validated rule (compileRule). */
export type TakeRule<R> = (rule: SourcedRule) => R

/** A rule the reader knows by where it was read and its id (a compiled rule). */
interface Identified {
  readonly source: string
  readonly id: string
}

/** How long a start waits for the worker before giving up (a 10,000-rule folder takes seconds). */
const SYNC_TIMEOUT_MS = 300_000

/**
 * Reads the folder on a worker and waits for it, blocking this thread (loadPolicySet given
 * `offThreadBytes`): the parser's garbage stays in the worker's heap, which is freed when it ends.
 */
export function readFolderWaiting<R>(options: object, take: TakeRule<R>): FolderRead<R> {
  const worker = startWorker({ yields: false })
  const { port, signal } = post(worker, options, undefined, undefined)
  try {
    if (Atomics.wait(signal, 0, 0, SYNC_TIMEOUT_MS) === 'timed-out')
      throw new Error(`reading the policy folder took longer than ${SYNC_TIMEOUT_MS} ms`)
    const read = new Collected<R>()
    for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port)) {
      const message = m.message as FolderMessage
      if (message.kind !== 'rules') {
        read.end(message)
        break
      }
      for (const rule of message.rules) read.rules.push(takeIn(rule, take, NOT_RUNNING))
    }
    return read.result()
  } finally {
    port.close()
    void worker.terminate()
  }
}

/**
 * The worker that reads folders for reloads, kept from one to the next: a new thread compiles the
 * reader's code (the YAML parser, the schema) from scratch, and that compiling, done on V8's
 * helper threads at the serving thread's priority, cost a reload of 10,000 rules about 0.6 s of
 * CPU beside the read's own 0.2–0.3 s. Started by the first reload that needs it; a read that
 * failed in any other way than the folder's own problems ends it, and the next read starts anew.
 */
let reader: Worker | undefined
/** Reads run one after another on that worker. */
let line: Promise<void> = Promise.resolve()
/**
 * How long the worker is kept with no read to do: reloads come in bursts (an edit, a fix, a
 * rollout), and the heap a read of a large folder leaves in the worker (tens of MB until its next
 * collection) goes back once the burst is over. A reload after that starts a worker anew.
 */
const KEPT_IDLE_MS = 60_000
let idle: NodeJS.Timeout | undefined

/**
 * Reads the folder on a worker while this thread goes on serving (a reload): the rules arrive in
 * chunks, one at a time (FolderJob `taken`), and are taken in a rule at a time in slices paced by
 * `pacer`, so the reload never holds the thread for more than a slice. A rule unchanged from one
 * of `running` (the policy the reload replaces) is that rule, neither sent nor taken in again.
 */
export function readFolderBeside<R>(
  options: object,
  take: TakeRule<R>,
  pacer: Pacer,
  running: readonly (R & Identified)[] = NOT_RUNNING,
): Promise<FolderRead<R>> {
  clearTimeout(idle)
  const read = line.then(() => readBeside(options, take, pacer, running))
  const settled = read.then(
    () => undefined,
    () => undefined,
  )
  line = settled
  void settled.then(() => {
    // The last read asked for has ended: the worker is kept for a while.
    if (line === settled) idle = setTimeout(endReader, KEPT_IDLE_MS).unref()
  })
  return read
}

/** Ends the kept worker (idle, or a test that wants a cold one). */
export function endReader(): void {
  clearTimeout(idle)
  const worker = reader
  reader = undefined
  void worker?.terminate()
}

async function readBeside<R>(
  options: object,
  take: TakeRule<R>,
  pacer: Pacer,
  running: readonly (R & Identified)[],
): Promise<FolderRead<R>> {
  const worker = (reader ??= keptWorker())
  const taken = new Int32Array(new SharedArrayBuffer(4))
  // Two lists of strings the rules hold already: copied to the worker in under a millisecond.
  const list =
    running.length === 0
      ? undefined
      : { sources: running.map((r) => r.source), ids: running.map((r) => r.id) }
  const { port } = post(worker, options, taken, list)
  const inbox = new Inbox(worker, port)
  const read = new Collected<R>()
  let answered = false
  try {
    for (let m = await inbox.next(); m !== undefined; m = await inbox.next()) {
      if (m.kind !== 'rules') {
        read.end(m)
        break
      }
      pacer.start()
      for (const rule of m.rules) {
        read.rules.push(takeIn(rule, take, running))
        if (pacer.due()) await pacer.rest()
      }
      // The worker may post the next chunk.
      Atomics.add(taken, 0, 1)
      Atomics.notify(taken, 0)
    }
    const result = read.result()
    answered = true
    return result
  } finally {
    inbox.close()
    // A worker still posting (the read failed here) would go on reading for nobody.
    if (!answered) {
      if (reader === worker) reader = undefined
      void worker.terminate()
    }
  }
}

/** The reload worker: forgotten once it ends, whenever that is. */
function keptWorker(): Worker {
  const worker = startWorker({ yields: true })
  const forget = (): void => {
    if (reader === worker) reader = undefined
  }
  // Between reads nobody else listens: an error must not go unhandled.
  worker.on('error', forget)
  worker.once('exit', forget)
  return worker
}

/** The worker's messages, one at a time; undefined once it ended without more. */
class Inbox {
  private readonly queue: FolderMessage[] = []
  private failed: Error | undefined
  private exited = false
  private wake: (() => void) | undefined

  constructor(
    private readonly worker: Worker,
    private readonly port: MessagePort,
  ) {
    port.on('message', this.onMessage)
    worker.once('error', this.onError)
    // A worker that ended (killed, out of memory) without a last message fails the read: what it
    // posted before is still in the port's queue.
    worker.once('exit', this.onExit)
  }

  async next(): Promise<FolderMessage | undefined> {
    for (;;) {
      const m = this.queue.shift()
      if (m !== undefined) return m
      if (this.failed !== undefined) throw this.failed
      if (this.exited) return undefined
      await new Promise<void>((resolve) => (this.wake = resolve))
    }
  }

  close(): void {
    this.port.close()
    this.worker.off('error', this.onError)
    this.worker.off('exit', this.onExit)
  }

  private readonly onMessage = (m: FolderMessage): void => {
    this.queue.push(m)
    this.poke()
  }

  private readonly onError = (err: Error): void => {
    this.failed = err
    this.poke()
  }

  private readonly onExit = (): void => {
    for (
      let m = receiveMessageOnPort(this.port);
      m !== undefined;
      m = receiveMessageOnPort(this.port)
    )
      this.queue.push(m.message as FolderMessage)
    this.exited = true
    this.poke()
  }

  private poke(): void {
    const wake = this.wake
    this.wake = undefined
    wake?.()
  }
}

const NOT_RUNNING: readonly never[] = Object.freeze([])

/** A rule as the worker sent it, taken in: `take` of it, or the running rule it named. */
function takeIn<R>(rule: SourcedRule | number, take: TakeRule<R>, running: readonly R[]): R {
  if (typeof rule !== 'number') return take(rule)
  const found = running[rule]
  if (found === undefined)
    throw new Error(`the reader named running rule ${rule} of ${running.length}`)
  return found
}

/** Posts one read to `worker`: its answers come on `port`. */
function post(
  worker: Worker,
  options: object,
  taken: Int32Array | undefined,
  running: RunningList | undefined,
): { port: MessagePort; signal: Int32Array } {
  const channel = new MessageChannel()
  const signal = new Int32Array(new SharedArrayBuffer(4))
  const job: FolderJob = { options, port: channel.port2, signal, taken, running }
  worker.postMessage(job, [channel.port2])
  return { port: channel.port1, signal }
}

function startWorker(setup: ReaderSetup): Worker {
  const entry = new URL(
    `./policy-worker${fileURLToPath(import.meta.url).endsWith('.ts') ? '.ts' : '.js'}`,
    import.meta.url,
  )
  const worker = entry.pathname.endsWith('.ts')
    ? // Run from TypeScript sources (tests, tsx), the worker registers tsx's loader as its parent
      // did; the built gateway runs policy-worker.js as it is.
      new Worker(
        `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry.href)}) })`,
        { eval: true, workerData: setup },
      )
    : new Worker(entry, { workerData: setup })
  // The worker never keeps the gateway alive: a read nobody waits for is abandoned.
  worker.unref()
  return worker
}

/** What the worker sent: the rules as taken in, then its last message. */
class Collected<R> {
  readonly rules: R[] = []
  private last: FolderMessage | undefined

  end(m: FolderMessage): void {
    this.last = m
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
