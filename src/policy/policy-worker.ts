import { parentPort, workerData } from 'node:worker_threads'
import { yieldThisThread } from '../yielding.js'
import type { SourcedRule } from './compile.js'
import type * as Load from './load.js'
import type { FolderJob, FolderMessage, ReaderSetup } from './off-thread.js'
import { RunningRules } from './running-rules.js'

/**
 * The worker thread of off-thread.ts: reads and validates policy folders with load.ts's own
 * code, one job at a time as they are posted, and answers each on its own port. Rules go in
 * chunks, so the serving thread takes each in as a short task.
 */

const CHUNK = 256

/**
 * How long the worker waits for a chunk to be taken in before posting the next anyway: a serving
 * thread too busy to take a chunk in for a second gets the rest queued, rather than a reload that
 * never ends.
 */
const PACE_MS = 1000

// In the idle class, ten nice values below the serving thread (yielding.ts), so a request that wakes
// the serving thread takes the core from the read at once, and the read still ends while a busy
// machine's other processes run at their usual priority. Where neither is allowed (some
// containers) it reads at the normal priority.
if ((workerData as ReaderSetup).yields) yieldThisThread()

/**
 * The reader's code, or why it did not load: every job is then answered `crashed`, so a start
 * waiting on the job's signal (readFolderWaiting) hears at once instead of at its timeout.
 */
const loaded: typeof Load | Error = await import('./load.js').catch((err: unknown) =>
  err instanceof Error ? err : new Error(String(err)),
)

/** Waits until `count` chunks were taken in (FolderJob `taken`), or PACE_MS passed. */
function takenIn(taken: Int32Array | undefined, count: number): void {
  if (taken === undefined) return
  for (let seen = Atomics.load(taken, 0); seen < count; seen = Atomics.load(taken, 0))
    if (Atomics.wait(taken, 0, seen, PACE_MS) === 'timed-out') return
}

function run({ options, port, signal, taken, running }: FolderJob): void {
  const post = (m: FolderMessage): void => port.postMessage(m)
  try {
    if (loaded instanceof Error) throw loaded
    const { checkPolicyFolder } = loaded
    // Checked, not compiled: the serving thread compiles what it takes in (compile.ts checkRule).
    const read = checkPolicyFolder(options as Parameters<typeof checkPolicyFolder>[0])
    const unchanged = running === undefined ? undefined : new RunningRules(running)
    for (let i = 0, chunk = 0; i < read.rules.length; i += CHUNK, chunk++) {
      takenIn(taken, chunk)
      const rules: (SourcedRule | number)[] = []
      for (let k = i; k < Math.min(i + CHUNK, read.rules.length); k++) {
        const rule = read.rules[k] as SourcedRule
        const id = (read.compiled[k] as { id: string }).id
        // A rule the edit left as it was goes as its place among the running rules; the others
        // with the ids the check gave them, so the serving thread does not hash them again.
        rules.push(unchanged?.find(k, rule.source, id) ?? { ...rule, id })
      }
      post({ kind: 'rules', rules })
    }
    post({ kind: 'done', limits: read.limits, id: read.id })
  } catch (err) {
    if (!(loaded instanceof Error) && err instanceof loaded.PolicyError)
      post({ kind: 'failed', problems: err.located })
    else
      post({
        kind: 'crashed',
        message: err instanceof Error ? (err.stack ?? err.message) : String(err),
      })
  } finally {
    // The port stays open: the reader closes it once it took the last message in.
    Atomics.store(signal, 0, 1)
    Atomics.notify(signal, 0)
  }
}

parentPort?.on('message', run)
