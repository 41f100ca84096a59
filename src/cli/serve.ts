import cluster from 'node:cluster'
import { runPrimary, workerCount } from '../cluster/primary.js'
import { ConfigError, loadConfigFile } from '../runtime/load.js'
import { startGateway } from '../server.js'
import { yieldOtherThreads } from '../yielding.js'
import { problemsText } from './problems.js'

/** `mcp-edge serve`: runs the gateway (or, with `workers:`, the primary) until SIGTERM or SIGINT. */
export async function serveCommand(file: string): Promise<number> {
  let loaded
  try {
    loaded = loadConfigFile(file)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    process.stderr.write(problemsText(file, err))
    return 1
  }
  const workers = workerCount(loaded.config.workers)
  if (workers > 1 && cluster.isPrimary) return runPrimary(loaded, workers)
  // What no request waits on (collections, compiling, a reload's reader) gives way to serving.
  await yieldOtherThreads()
  const gw = await startGateway(loaded, { worker: cluster.isWorker })
  const exit = new Promise<number>((resolve) => {
    let stopping = false
    const stop = (signal: string): void => {
      if (stopping) return
      stopping = true
      gw.log.info({ signal }, 'draining')
      gw.close().then(
        () => resolve(0),
        (err: unknown) => {
          gw.log.error({ err }, 'shutdown failed')
          resolve(1)
        },
      )
    }
    // SIGHUP re-reads the config and policies at once (the watcher also polls every second).
    process.on('SIGHUP', () => void gw.rereadConfig())
    process.once('SIGTERM', () => stop('SIGTERM'))
    process.once('SIGINT', () => stop('SIGINT'))
  })
  const code = await exit
  // A worker's IPC channel to the primary would keep it alive after the drain.
  if (cluster.isWorker) process.disconnect()
  return code
}
