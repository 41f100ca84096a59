#!/usr/bin/env -S node --max-semi-space-size=8
// The V8 flag above caps each young-generation semi-space at 8 MB instead of Node's 16 MB. Under
// sustained load V8 grows the young generation to its cap; at 8 MB the gateway's peak RSS under
// c=64 drops by about 15 MB with no measurable CPU cost (docs/design/hot-path.md §Memory at rest).
// The container runs this file through the same line; `node dist/cli.js` skips it.
import cluster from 'node:cluster'
import { parseArgs } from 'node:util'
import { writeFileSync } from 'node:fs'
import { runPrimary, workerCount } from './cluster/primary.js'
import { ConfigError, loadConfigFile } from './runtime/load.js'
import { startGateway } from './server.js'

const USAGE = `usage:
  mcp-edge serve --config FILE    run the gateway
  mcp-edge check --config FILE    validate a config; exits 1 listing every problem
  mcp-edge explain --config FILE --server NAME (--tool NAME | --prompt NAME | --resource URI)
                   [--claims JSON] [--json]
                                  the policy decision and the rule that made it; exits 0 allow, 3 deny
  mcp-edge pin --config FILE [--lock PATH] [--server NAME]... [--check]
                                  write the tool and prompt digests of every server to the lock
                                  file; --check compares instead: exits 0 clean, 1 drift (with a
                                  diff), 2 config or connection error (docs/catalog.md)
  mcp-edge schema (config | policy) [--write]
                                  the JSON Schema of a config or policy file, for editors; --write
                                  rewrites the shipped copy (deploy/gateway.schema.json, policies/schema.json)
`

/** Entry point of the `mcp-edge` binary. */
export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv
  const { values } = parseArgs({
    args: rest,
    options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
    strict: false,
    allowPositionals: true,
  })
  const file = typeof values.config === 'string' ? values.config : undefined
  if (values.help === true || command === undefined || command === 'help') {
    process.stdout.write(USAGE)
    return command === undefined ? 2 : 0
  }
  // Each command loads what it needs: `serve` does not carry the schema printer, `explain` or
  // `pin` in its heap for the life of the process.
  if (command === 'schema') return schema(rest)
  if (file === undefined) {
    process.stderr.write(`mcp-edge ${command}: --config FILE is required\n${USAGE}`)
    return 2
  }
  switch (command) {
    case 'check':
      return check(file)
    case 'serve':
      return serve(file)
    case 'explain':
      return (await import('./cli/explain.js')).explainCommand(file, rest, {
        out: (text) => process.stdout.write(text),
        err: (text) => process.stderr.write(text),
      })
    case 'pin':
      return (await import('./cli/pin.js')).pinCommand(file, rest, {
        out: (text) => process.stdout.write(text),
        err: (text) => process.stderr.write(text),
        color: process.stdout.isTTY === true && process.env.NO_COLOR === undefined,
      })
    default:
      process.stderr.write(`mcp-edge: unknown command ${command}\n${USAGE}`)
      return 2
  }
}

async function schema(args: readonly string[]): Promise<number> {
  const name = args.find((a) => !a.startsWith('-'))
  if (name !== 'config' && name !== 'policy') {
    process.stderr.write(`mcp-edge schema: name config or policy\n${USAGE}`)
    return 2
  }
  const { jsonSchemaText, JSON_SCHEMAS } = await import('./cli/json-schema.js')
  const text = jsonSchemaText(name)
  if (args.includes('--write')) writeFileSync(JSON_SCHEMAS[name].file, text)
  else process.stdout.write(text)
  return 0
}

function check(file: string): number {
  try {
    const { config } = loadConfigFile(file)
    process.stdout.write(`${file}: ok (${Object.keys(config.servers).length} servers)\n`)
    return 0
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    process.stderr.write(
      `${file}: ${err.problems.length} problem(s)\n  ${err.problems.join('\n  ')}\n`,
    )
    return 1
  }
}

async function serve(file: string): Promise<number> {
  let loaded
  try {
    loaded = loadConfigFile(file)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    process.stderr.write(
      `${file}: ${err.problems.length} problem(s)\n  ${err.problems.join('\n  ')}\n`,
    )
    return 1
  }
  const workers = workerCount(loaded.config.workers)
  if (workers > 1 && cluster.isPrimary) return runPrimary(loaded, workers)
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

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (err: unknown) => {
    process.stderr.write(`mcp-edge: ${(err as Error).stack ?? String(err)}\n`)
    process.exitCode = 1
  },
)
