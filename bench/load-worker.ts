/**
 * The load generator process: pinned and niced by the runner, away from the gateway's core. It
 * takes one cell at a time over IPC and answers with the measurement; it exits when the runner
 * goes away.
 */
import { measureCell, type CellMeasurement, type CellSpec } from './measure.js'

/** Runner → worker. */
export interface RunCell {
  readonly kind: 'run'
  readonly spec: CellSpec
}

/** Worker → runner. */
export type WorkerReply =
  | { readonly kind: 'ready' }
  | { readonly kind: 'result'; readonly result: CellMeasurement }
  | { readonly kind: 'error'; readonly message: string }

function reply(message: WorkerReply): void {
  process.send?.(message)
}

function main(): void {
  if (process.send === undefined) throw new Error('load-worker must be started with an IPC channel')
  process.on('message', (message: RunCell) => {
    measureCell(message.spec).then(
      (result) => reply({ kind: 'result', result }),
      (err: unknown) =>
        reply({
          kind: 'error',
          message: err instanceof Error ? (err.stack ?? err.message) : String(err),
        }),
    )
  })
  // The runner died or closed the channel: nothing left to measure for.
  process.on('disconnect', () => process.exit(0))
  reply({ kind: 'ready' })
}

main()
