import { yieldThisProcess } from '../yielding.js'
import type { SourcedRule } from './compile.js'
import type * as Load from './load.js'
import type { FolderMessage, KeptRun, ToReader } from './off-thread.js'
import { RunningRules, type RunningList, type RunningRef } from './running-rules.js'

/**
 * The reader of off-thread.ts, a process of its own: reads and validates policy folders with
 * load.ts's own code, one read at a time as they are asked for, and answers each on the IPC
 * channel. Rules go in chunks, each once the one before it was taken in, so the serving thread
 * takes each in as a short task.
 */

/** Rules a chunk holds to be taken in (compiled) by the serving thread; unchanged ones aside. */
const CHUNK = 256

/**
 * How long the reader waits for a chunk to be taken in before sending the next anyway: a serving
 * thread too busy to take a chunk in for a second gets the rest queued, rather than a reload that
 * never ends.
 */
const PACE_MS = 1000

// Every thread of the reader in the idle class, at nice 19 (the gateway lowered it as it forked
// it, off-thread.ts; yielding.ts), before any of the reader's code is compiled: a request that
// wakes the serving thread takes the core from the read, as a rule at once, and the read still
// ends while a busy machine's other processes run at their usual priority. Where the class is not
// allowed (some containers) it reads at nice 19 alone, and where neither is, at the normal one.
yieldThisProcess()

// The gateway ended, or ended the reader: so does the reader, whatever it was doing.
process.on('disconnect', () => process.exit(0))

/**
 * The reader's code, or why it did not load: every read is then answered `crashed`, so the
 * gateway hears at once.
 */
const loaded: typeof Load | Error = await import('./load.js').catch((err: unknown) =>
  err instanceof Error ? err : new Error(String(err)),
)

/** The read under way, and how many of its chunks were taken in. */
let current = 0
let taken = 0
let wake: (() => void) | undefined

/** Resolves once `count` chunks of the current read were taken in, or after PACE_MS. */
async function takenIn(count: number): Promise<void> {
  const until = performance.now() + PACE_MS
  while (taken < count) {
    const left = until - performance.now()
    if (left <= 0) return
    let timer: NodeJS.Timeout | undefined
    await new Promise<void>((resolve) => {
      wake = resolve
      timer = setTimeout(resolve, left)
    })
    clearTimeout(timer)
    wake = undefined
  }
}

function send(m: FolderMessage): void {
  process.send?.(m)
}

/** The rules this reader's last read answered, as the gateway took them in (RunningRef). */
let last: { readonly read: number; readonly list: RunningList } | undefined

/**
 * The running rules of a read: listed, or those of this reader's last read. A read it does not
 * hold (it cannot be asked for one) finds no rule unchanged: every rule goes in full.
 */
function runningOf(ref: RunningRef | undefined): RunningRules | undefined {
  if (ref === undefined) return undefined
  if (!('read' in ref)) return new RunningRules(ref)
  return last?.read === ref.read ? new RunningRules(last.list) : undefined
}

async function read(job: Extract<ToReader, { kind: 'read' }>): Promise<void> {
  current = job.read
  taken = 0
  const unchanged = runningOf(job.running)
  // A read that fails answers nothing the gateway could run: it may not be named again.
  last = undefined
  try {
    if (loaded instanceof Error) throw loaded
    const { checkPolicyFolder } = loaded
    // Checked, not compiled: the serving thread compiles what it takes in (compile.ts checkRule).
    const folder = checkPolicyFolder(job.options as Parameters<typeof checkPolicyFolder>[0])
    const count = folder.rules.length
    for (let k = 0, chunk = 0; k < count; chunk++) {
      await takenIn(chunk)
      const rules: (SourcedRule | KeptRun)[] = []
      let run: { from: number; count: number; sources?: string[] } | undefined
      // A chunk holds CHUNK rules to be taken in; runs of unchanged ones cost little, and a moved
      // rule (a copy with its new source) an eighth of one.
      for (let fresh = 0; k < count && fresh < CHUNK; k++) {
        const rule = folder.rules[k] as SourcedRule
        const id = (folder.compiled[k] as { id: string }).id
        // A rule the edit left as it was goes as its place among the running rules, in a run
        // with the places before it; one it moved (a rule added before it), the same with its
        // new source; the others with the ids the check gave them, so the serving thread does
        // not hash them again.
        const place = unchanged?.find(k, rule.source, id)
        const moved = place === undefined && job.moves ? unchanged?.moved(id) : undefined
        const at = place ?? moved
        if (at === undefined) {
          rules.push({ ...rule, id })
          run = undefined
          fresh++
        } else if (
          run !== undefined &&
          run.from + run.count === at &&
          (run.sources === undefined) === (moved === undefined)
        ) {
          run.count++
          run.sources?.push(rule.source)
        } else {
          run =
            moved === undefined
              ? { from: at, count: 1 }
              : { from: at, count: 1, sources: [rule.source] }
          rules.push(run)
        }
        if (moved !== undefined) fresh += 1 / 8
      }
      send({ kind: 'rules', rules })
    }
    send({ kind: 'done', limits: folder.limits, id: folder.id })
    last = {
      read: job.read,
      list: {
        sources: folder.rules.map((r) => r.source),
        ids: folder.compiled.map((c) => (c as { id: string }).id),
      },
    }
  } catch (err) {
    if (!(loaded instanceof Error) && err instanceof loaded.PolicyError)
      send({ kind: 'failed', problems: err.located })
    else
      send({
        kind: 'crashed',
        message: err instanceof Error ? (err.stack ?? err.message) : String(err),
      })
  }
}

process.on('message', (m: ToReader) => {
  if (m.kind === 'read') {
    void read(m)
    return
  }
  // An acknowledgement of an earlier read (abandoned by the gateway) counts for nothing.
  if (m.read !== current) return
  taken++
  wake?.()
})
