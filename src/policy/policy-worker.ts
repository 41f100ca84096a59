import { setPriority } from 'node:os'
import { workerData } from 'node:worker_threads'
import type { FolderJob, FolderMessage } from './off-thread.js'

/**
 * The worker thread of off-thread.ts: reads and validates one policy folder with load.ts's own
 * code, posts the result and ends. Rules go in chunks, so the serving thread takes each in as a
 * short task.
 */

const CHUNK = 256
/**
 * The nice value of a reload's worker. Linux nice values are per thread (setpriority(2), NOTES):
 * at 10 the thread gets about a tenth of a core the serving thread keeps busy (CFS weights 110
 * against 1024) and any idle time, so requests barely notice it and the reload still ends while a
 * busy machine's other processes run at their usual priority.
 */
const YIELDING = 10

/**
 * How long the worker waits for a chunk to be taken in before posting the next anyway: a serving
 * thread too busy to take a chunk in for a second gets the rest queued, rather than a reload that
 * never ends.
 */
const PACE_MS = 1000

const { options, port, signal, yields, taken } = workerData as FolderJob
const post = (m: FolderMessage): void => port.postMessage(m)

/** Waits until `count` chunks were taken in (FolderJob `taken`), or PACE_MS passed. */
function takenIn(count: number): void {
  if (taken === undefined) return
  for (let seen = Atomics.load(taken, 0); seen < count; seen = Atomics.load(taken, 0))
    if (Atomics.wait(taken, 0, seen, PACE_MS) === 'timed-out') return
}

try {
  if (yields)
    try {
      setPriority(YIELDING)
    } catch {
      // Not allowed here (some containers): read at the normal priority.
    }
  const { PolicyError, readPolicyFolder } = await import('./load.js')
  try {
    const read = readPolicyFolder(options as Parameters<typeof readPolicyFolder>[0])
    for (let i = 0, chunk = 0; i < read.rules.length; i += CHUNK, chunk++) {
      takenIn(chunk)
      post({ kind: 'rules', rules: read.rules.slice(i, i + CHUNK) })
    }
    post({ kind: 'done', limits: read.limits, id: read.id })
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err
    post({ kind: 'failed', problems: err.located })
  }
} catch (err) {
  post({
    kind: 'crashed',
    message: err instanceof Error ? (err.stack ?? err.message) : String(err),
  })
} finally {
  Atomics.store(signal, 0, 1)
  Atomics.notify(signal, 0)
}
