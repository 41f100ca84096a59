/** The runner's side of the load worker: start it pinned and niced, then run cells one by one. */
import { join } from 'node:path'
import { spawnNode, type Child } from './children.js'
import type { RunCell, WorkerReply } from './load-worker.js'
import type { CellMeasurement, CellSpec } from './measure.js'

/** Slack on top of warm-up + window for autocannon to stop and the stats to be read. */
const CELL_SLACK_MS = 30_000
const START_TIMEOUT_MS = 20_000

/** A started load worker. */
export interface LoadWorker {
  readonly child: Child
  run(spec: CellSpec): Promise<CellMeasurement>
}

/** Starts the worker on `cpu`, niced so it yields to the backend it shares the core with. */
export async function startLoadWorker(repoRoot: string, cpu: number): Promise<LoadWorker> {
  const script = join(repoRoot, 'bench', 'load-worker.ts')
  const child = spawnNode('load worker', ['--import', 'tsx', script], {
    cpu,
    nice: 10,
    ipc: true,
    cwd: repoRoot,
  })
  const ready = await nextReply(child, START_TIMEOUT_MS)
  if (ready.kind !== 'ready') throw new Error(`load worker: unexpected first message ${ready.kind}`)
  return {
    child,
    async run(spec) {
      const message: RunCell = { kind: 'run', spec }
      child.proc.send(message)
      const timeoutMs = (spec.warmupS + spec.durationS) * 1000 + CELL_SLACK_MS
      const reply = await nextReply(child, timeoutMs)
      if (reply.kind === 'result') return reply.result
      throw new Error(`load worker: ${reply.kind === 'error' ? reply.message : 'unexpected reply'}`)
    },
  }
}

function nextReply(child: Child, timeoutMs: number): Promise<WorkerReply> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: WorkerReply): void => settle(() => resolve(message))
    const timer = setTimeout(
      () =>
        settle(() =>
          reject(new Error(`load worker: no answer within ${timeoutMs} ms\n${child.output()}`)),
        ),
      timeoutMs,
    )
    let isSettled = false
    const settle = (fn: () => void): void => {
      if (isSettled) return
      isSettled = true
      clearTimeout(timer)
      child.proc.off('message', onMessage)
      fn()
    }
    child.proc.on('message', onMessage)
    void child.exited.then((code) =>
      settle(() => reject(new Error(`load worker exited (${code})\n${child.output()}`))),
    )
  })
}
