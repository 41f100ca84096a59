#!/usr/bin/env -S node --max-semi-space-size=8
// The V8 flag above caps each young-generation semi-space at 8 MB instead of Node's 16 MB. Under
// sustained load V8 grows the young generation to its cap; at 8 MB the gateway's peak RSS under
// c=64 drops by about 15 MB with no measurable CPU cost (docs/design/hot-path.md §Memory at rest).
// The container runs this file through the same line; `node dist/cli.js` skips it.
import { COMMAND_USAGE, isCommand, USAGE, type Command } from './cli/usage.js'

/** Where the commands write. */
const io = {
  out: (text: string): void => void process.stdout.write(text),
  err: (text: string): void => void process.stderr.write(text),
}

/**
 * Entry point of the `mcp-edge` binary. Help is answered from cli/usage.ts alone; each command
 * then imports only what it needs (`check` never loads the HTTP server, `serve` never the schema
 * printer, `explain` or `pin`), so `--help` prints at once and a long-running `serve` carries no
 * code it does not run.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv
  if (command === undefined) {
    io.err(USAGE)
    return 2
  }
  if (command === '--help' || command === '-h' || command === 'help') return help(rest[0])
  if (!isCommand(command)) {
    io.err(`mcp-edge: unknown command ${command}\n\n${USAGE}`)
    return 2
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out(COMMAND_USAGE[command])
    return 0
  }
  if (command === 'schema') return schema(rest)
  const file = configOption(rest)
  if (file === undefined) {
    io.err(`mcp-edge ${command}: --config FILE is required\n\n${COMMAND_USAGE[command]}`)
    return 2
  }
  return run(command, file, rest)
}

function help(topic: string | undefined): number {
  if (topic === undefined) {
    io.out(USAGE)
    return 0
  }
  if (!isCommand(topic)) {
    io.err(`mcp-edge help: unknown command ${topic}\n\n${USAGE}`)
    return 2
  }
  io.out(COMMAND_USAGE[topic])
  return 0
}

async function run(command: Exclude<Command, 'schema'>, file: string, rest: readonly string[]) {
  switch (command) {
    case 'check':
      return (await import('./cli/check.js')).checkCommand(file, io)
    case 'serve':
      return (await import('./cli/serve.js')).serveCommand(file)
    case 'explain':
      return (await import('./cli/explain.js')).explainCommand(file, rest, io)
    case 'pin':
      return (await import('./cli/pin.js')).pinCommand(file, rest, {
        ...io,
        color: process.stdout.isTTY === true && process.env.NO_COLOR === undefined,
      })
    case 'tokens':
      return (await import('./cli/tokens.js')).tokensCommand(file, rest, io)
  }
}

/** `--config FILE`, `--config=FILE`, `-c FILE`; the commands read their other options themselves. */
function configOption(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string
    if (a.startsWith('--config=')) return a.slice('--config='.length)
    if ((a === '--config' || a === '-c') && i + 1 < args.length) return args[i + 1]
  }
  return undefined
}

async function schema(args: readonly string[]): Promise<number> {
  const name = args.find((a) => !a.startsWith('-'))
  if (name !== 'config' && name !== 'policy') {
    io.err(`mcp-edge schema: name config or policy\n\n${COMMAND_USAGE.schema}`)
    return 2
  }
  const { jsonSchemaText, JSON_SCHEMAS } = await import('./cli/json-schema.js')
  const text = jsonSchemaText(name)
  if (args.includes('--write'))
    (await import('node:fs')).writeFileSync(JSON_SCHEMAS[name].file, text)
  else io.out(text)
  return 0
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
