/**
 * Child processes of the bench: pinned with taskset, tracked, and always killed on the way out
 * (normal end, error, SIGINT), so a failed run never leaves a server holding a core.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'

/** A started child with the tail of its output, for error messages. */
export interface Child {
  readonly name: string
  readonly proc: ChildProcess
  readonly pid: number
  /** Last few KB of stdout+stderr. */
  output(): string
  /** Resolves with the exit code (or signal name) once the process is gone. */
  readonly exited: Promise<string>
}

export interface SpawnOptions {
  /** One CPU, or a taskset list such as "0,1" (a gateway with workers). */
  readonly cpu: number | string
  readonly nice?: number
  readonly ipc?: boolean
  readonly cwd?: string
}

const TAIL_BYTES = 4096
const live = new Set<Child>()

/** taskset exists on this machine (util-linux); without it processes run unpinned. */
export const hasTaskset = spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0

/**
 * Starts `node <args>` pinned to one CPU (and niced if asked). taskset and nice exec, so the pid we
 * hold is node's own and /proc accounting sees the right process.
 */
export function spawnNode(name: string, args: readonly string[], opts: SpawnOptions): Child {
  const prefix = [
    ...(hasTaskset ? ['taskset', '-c', String(opts.cpu)] : []),
    ...(opts.nice === undefined ? [] : ['nice', '-n', String(opts.nice)]),
  ]
  const argv = [...prefix, process.execPath, ...args]
  const stdio = opts.ipc ? ['pipe', 'pipe', 'pipe', 'ipc'] : ['pipe', 'pipe', 'pipe']
  const proc = spawn(argv[0] ?? process.execPath, argv.slice(1), {
    cwd: opts.cwd,
    stdio: stdio as ['pipe', 'pipe', 'pipe'],
  })
  let tail = ''
  const keep = (chunk: Buffer): void => {
    tail = (tail + chunk.toString('utf8')).slice(-TAIL_BYTES)
  }
  proc.stdout?.on('data', keep)
  proc.stderr?.on('data', keep)
  const exited = new Promise<string>((resolve) => {
    proc.on('exit', (code, signal) => resolve(signal ?? String(code)))
    proc.on('error', (err) => resolve(`spawn error: ${err.message}`))
  })
  if (proc.pid === undefined) throw new Error(`could not start ${name}: ${argv.join(' ')}`)
  const child: Child = { name, proc, pid: proc.pid, output: () => tail, exited }
  live.add(child)
  void exited.then(() => live.delete(child))
  return child
}

/** Waits for a stdout line matching `pattern`; fails if the child exits or the deadline passes. */
export function waitForLine(
  child: Child,
  pattern: RegExp,
  timeoutMs: number,
): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let buffered = ''
    const onData = (chunk: Buffer): void => {
      buffered += chunk.toString('utf8')
      const match = buffered.match(pattern)
      if (match) finish(() => resolve(match))
    }
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(
            new Error(`${child.name}: no ${pattern} within ${timeoutMs} ms\n${child.output()}`),
          ),
        ),
      timeoutMs,
    )
    const finish = (settle: () => void): void => {
      clearTimeout(timer)
      child.proc.stdout?.off('data', onData)
      settle()
    }
    child.proc.stdout?.on('data', onData)
    void child.exited.then((code) =>
      finish(() =>
        reject(new Error(`${child.name} exited (${code}) before starting\n${child.output()}`)),
      ),
    )
  })
}

/** Stops every live child: SIGTERM, then SIGKILL after a grace period. */
export async function stopAll(graceMs = 2000): Promise<void> {
  const stopping = [...live].map(async (child) => {
    child.proc.kill('SIGTERM')
    const timer = setTimeout(() => child.proc.kill('SIGKILL'), graceMs)
    await child.exited
    clearTimeout(timer)
  })
  await Promise.all(stopping)
}

/** Last resort on process exit: synchronous SIGKILL of whatever is still running. */
export function killAllNow(): void {
  for (const child of live) child.proc.kill('SIGKILL')
}

/**
 * Runs a bench script's `main` as the process: children are killed if the process exits anyhow,
 * stopped gracefully once `main` settles, and the exit code is main's (1 when it throws).
 */
export function runScript(name: string, main: () => Promise<number | void>): void {
  process.on('exit', killAllNow)
  main().then(
    async (code) => {
      await stopAll()
      process.exit(code ?? 0)
    },
    async (err: unknown) => {
      process.stderr.write(`${name}: failed: ${err instanceof Error ? err.message : String(err)}\n`)
      await stopAll()
      process.exit(1)
    },
  )
}
