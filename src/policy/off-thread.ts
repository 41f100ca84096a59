import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { LocatedProblem } from '../config/located.js'
import { lowerChild } from '../yielding.js'
import type { SourcedLimit } from '../limits/rules.js'
import type { SourcedRule } from './compile.js'
import type { RunningRef } from './running-rules.js'
import type { Pacer } from './slices.js'

/**
 * Reading a large policy folder for a reload in a process of its own (docs/policy.md §Hot
 * reload): reading and validating thousands of rules takes a good part of a second (seconds when a
 * file has a problem and the `yaml` parser places it), which on the serving thread would pause
 * every request for as long and leave its garbage in the gateway's heap. The reader
 * (policy-reader.ts) runs load.ts's own reading and validation, so nothing is judged differently,
 * and sends back plain data: the validated rules and limits, or the problems. The serving thread
 * compiles the rules (compiled rules hold functions, which cannot be sent) as each chunk arrives,
 * so the plain copies die young: kept until the last chunk, every one of them would be copied by
 * each young-generation collection meanwhile, pausing requests for as long.
 *
 * A process, not a worker thread: all of its threads go to Linux's idle class (yielding.ts),
 * V8's platform threads that compile its code and collect its heap included. A worker's heap is
 * collected by the gateway's own platform threads, which cannot be put there (the serving
 * thread's concurrent marking would starve), and they took the serving core from requests.
 */

/**
 * What the reader sends, in this order: rules in chunks, then the rest, or why it failed. Rules
 * unchanged from running ones (the read's `running`) are sent as runs of places in that list: an
 * edit of one rule of 10,000 is then a chunk of three entries, not forty chunks of numbers, each
 * a task of the serving thread and an acknowledgement.
 */
export type FolderMessage =
  | { readonly kind: 'rules'; readonly rules: readonly (SourcedRule | KeptRun)[] }
  | { readonly kind: 'done'; readonly limits: readonly SourcedLimit[]; readonly id: string }
  | { readonly kind: 'failed'; readonly problems: readonly LocatedProblem[] }
  | { readonly kind: 'crashed'; readonly message: string }

/**
 * The running rules `from` to `from + count - 1`, unchanged, in this order; with `sources`, each
 * read from the source of the same place there (moved: a rule added before them), not its own.
 */
export interface KeptRun {
  readonly from: number
  readonly count: number
  readonly sources?: readonly string[]
}

/** What the gateway sends the reader: a read, or that a chunk of read `read` was taken in. */
export type ToReader =
  | {
      readonly kind: 'read'
      /** Numbers the read, for the acknowledgements of its chunks. */
      readonly read: number
      /** load.ts PolicyLoadOptions (plain data). */
      readonly options: object
      /** The rules of the policy a reload replaces (running-rules.ts); undefined: none. */
      readonly running: RunningRef | undefined
      /** Whether the reader may send moved rules (KeptRun `sources`): the caller takes them. */
      readonly moves: boolean
    }
  /**
   * The reader sends a chunk only once the one before it was taken in: Node delivers every
   * message already arrived in one task, so chunks sent all at once would be copied into this
   * thread's heap in one long pause, each young-generation collection meanwhile copying all of
   * them again.
   */
  | { readonly kind: 'taken'; readonly read: number }

/** A folder read in the reader: its validated content, or the problems that refused it. */
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

/** What the caller makes of a running rule read again from another source (movedRule). */
export type MoveRule<R> = (rule: R, source: string) => R

/** A rule the reader knows by where it was read and its id (a compiled rule). */
interface Identified {
  readonly source: string
  readonly id: string
}

/**
 * The reader, kept from one reload to the next: a new one loads and compiles its code (the YAML
 * parser, the schema) from scratch, in the idle class but still about 0.6 s of CPU for 10,000
 * rules beside the read's own 0.2–0.3 s. Started by the first reload that needs it; a read that
 * failed in any other way than the folder's own problems ends it, and the next read starts anew.
 */
let reader: ChildProcess | undefined
/** Reads run one after another in that reader. */
let line: Promise<void> = Promise.resolve()
let reads = 0
/**
 * The rules the last read answered, as the serving thread took them in, and which reader read
 * them: a reload that replaces a policy of exactly these rules names that read instead of
 * listing them (running-rules.ts RunningRef).
 */
let lastAnswer:
  | { readonly reader: ChildProcess; readonly read: number; readonly rules: readonly unknown[] }
  | undefined
/**
 * How long the reader is kept with no read to do: reloads come in bursts (an edit, a fix, a
 * rollout), and the memory a read of a large folder leaves in it (tens of MB until its next
 * collection) goes back once the burst is over. A reload after that starts a reader anew.
 */
const KEPT_IDLE_MS = 60_000
let idle: NodeJS.Timeout | undefined

/**
 * Reads the folder in the reader while this thread goes on serving (a reload): the rules arrive
 * in chunks, one at a time (ToReader `taken`), and are taken in a rule at a time in slices paced
 * by `pacer`, so the reload never holds the thread for more than a slice. A rule unchanged from
 * one of `running` (the policy the reload replaces) is that rule, neither sent nor taken in again.
 */
export function readFolderBeside<R>(
  options: object,
  take: TakeRule<R>,
  pacer: Pacer,
  running: readonly (R & Identified)[] = NOT_RUNNING,
  move?: MoveRule<R>,
): Promise<FolderRead<R>> {
  clearTimeout(idle)
  const read = line.then(() => readBeside(options, take, pacer, running, move))
  const settled = read.then(
    () => undefined,
    () => undefined,
  )
  line = settled
  void settled.then(() => {
    // The last read asked for has ended: the reader is kept for a while.
    if (line === settled) idle = setTimeout(endReader, KEPT_IDLE_MS).unref()
  })
  return read
}

/** Ends the kept reader (idle, or a test that wants a cold one). */
export function endReader(): void {
  clearTimeout(idle)
  const child = reader
  reader = undefined
  child?.kill('SIGKILL')
}

async function readBeside<R>(
  options: object,
  take: TakeRule<R>,
  pacer: Pacer,
  running: readonly (R & Identified)[],
  move: MoveRule<R> | undefined,
): Promise<FolderRead<R>> {
  const started = reader === undefined
  const child = (reader ??= keptReader())
  // The fork held this thread 3–8 ms (a 10,000-rule gateway's), and listing the running rules
  // and sending them holds it 1–7 ms more: the requests due meanwhile are served in between.
  if (started) await new Promise((resolve) => setTimeout(resolve, 1))
  const n = ++reads
  // SECURITY: named by its read only when the running rules are that read's very array: the
  // reader then matches rules against what it read, which is what runs, place by place.
  const list: RunningRef | undefined =
    running.length === 0
      ? undefined
      : lastAnswer?.reader === child && lastAnswer.rules === running
        ? { read: lastAnswer.read }
        : { sources: running.map((r) => r.source), ids: running.map((r) => r.id) }
  const inbox = new Inbox(child)
  const collected = new Collected<R>()
  let answered = false
  try {
    send(child, { kind: 'read', read: n, options, running: list, moves: move !== undefined })
    for (let m = await inbox.next(); m !== undefined; m = await inbox.next()) {
      if (m.kind !== 'rules') {
        collected.end(m)
        break
      }
      pacer.start()
      for (const rule of m.rules) {
        if (!('from' in rule)) collected.rules.push(take(rule))
        else {
          const from = keptFrom(rule, running.length)
          const sources = movedSources(rule, move)
          for (let k = from; k < rule.from + rule.count; k++) {
            const kept = running[k] as R
            collected.rules.push(
              sources === undefined || move === undefined
                ? kept
                : move(kept, sources[k - from] as string),
            )
            // A run can be the whole policy: a look at the clock per rule would cost more.
            if (k % 1024 === 1023 && pacer.due()) await pacer.rest()
          }
        }
        if (pacer.due()) await pacer.rest()
      }
      // The reader may send the next chunk.
      send(child, { kind: 'taken', read: n })
    }
    const result = collected.result()
    answered = true
    lastAnswer = 'rules' in result ? { reader: child, read: n, rules: result.rules } : undefined
    return result
  } finally {
    inbox.close()
    // A reader still sending (the read failed here) would go on reading for nobody.
    if (!answered) {
      if (reader === child) reader = undefined
      child.kill('SIGKILL')
    }
  }
}

function send(child: ChildProcess, m: ToReader): void {
  if (!child.connected) throw new Error('the policy reader has ended')
  child.send(m)
}

/** The reload reader: forgotten once it ends, whenever that is. */
function keptReader(): ChildProcess {
  const ts = fileURLToPath(import.meta.url).endsWith('.ts')
  const entry = fileURLToPath(new URL(`./policy-reader${ts ? '.ts' : '.js'}`, import.meta.url))
  const child = fork(entry, [], {
    // Run from TypeScript sources (tests, tsx), the reader loads tsx as its parent did; the built
    // gateway runs policy-reader.js as it is, without the gateway's own node flags.
    execArgv: ts ? ['--import', 'tsx'] : [],
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  if (child.pid !== undefined) lowerChild(child.pid)
  const forget = (): void => {
    if (reader === child) reader = undefined
  }
  // Between reads nobody else listens: an error must not go unhandled.
  child.on('error', forget)
  child.once('exit', forget)
  idleRef(child)
  return child
}

/** The reader never keeps the gateway alive between reads: a read nobody waits for is abandoned. */
function idleRef(child: ChildProcess): void {
  child.unref()
  child.channel?.unref()
}

/** The reader's messages for one read, one at a time; undefined once it ended without more. */
class Inbox {
  private readonly queue: FolderMessage[] = []
  private failed: Error | undefined
  private ended = false
  private wake: (() => void) | undefined

  constructor(private readonly child: ChildProcess) {
    // Held while a read is under way, so that the process waits for its answer.
    child.channel?.ref()
    child.on('message', this.onMessage)
    child.once('error', this.onError)
    // A reader that ended (killed, out of memory) without a last message fails the read: what it
    // sent before is delivered first.
    child.once('close', this.onEnd)
  }

  async next(): Promise<FolderMessage | undefined> {
    for (;;) {
      const m = this.queue.shift()
      if (m !== undefined) return m
      if (this.failed !== undefined) throw this.failed
      if (this.ended) return undefined
      await new Promise<void>((resolve) => (this.wake = resolve))
    }
  }

  close(): void {
    this.child.off('message', this.onMessage)
    this.child.off('error', this.onError)
    this.child.off('close', this.onEnd)
    idleRef(this.child)
  }

  private readonly onMessage = (m: FolderMessage): void => {
    this.queue.push(m)
    this.poke()
  }

  private readonly onError = (err: Error): void => {
    this.failed = err
    this.poke()
  }

  private readonly onEnd = (): void => {
    this.ended = true
    this.poke()
  }

  private poke(): void {
    const wake = this.wake
    this.wake = undefined
    wake?.()
  }
}

const NOT_RUNNING: readonly never[] = Object.freeze([])

/** Where `run` starts, when every rule of it is one of `running`'s; otherwise the read fails. */
function keptFrom(run: KeptRun, running: number): number {
  const { from, count } = run
  if (
    !Number.isSafeInteger(from) ||
    !Number.isSafeInteger(count) ||
    from < 0 ||
    count < 1 ||
    from + count > running
  )
    throw new Error(`the reader named running rules ${from} to ${from + count - 1} of ${running}`)
  return from
}

/**
 * The sources a moved run's rules were read from (KeptRun `sources`); undefined for an unchanged
 * run. A run of other sources than rules, or moved where the caller takes no moved rules, fails
 * the read.
 */
export function movedSources<R>(
  run: KeptRun,
  move: MoveRule<R> | undefined,
): readonly string[] | undefined {
  const { sources } = run
  if (sources === undefined) return undefined
  if (
    move === undefined ||
    !Array.isArray(sources) ||
    sources.length !== run.count ||
    !sources.every((s) => typeof s === 'string')
  )
    throw new Error(
      `the reader sent moved rules ${run.from} to ${run.from + run.count - 1} malformed`,
    )
  return sources
}

/** What the reader sent: the rules as taken in, then its last message. */
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
