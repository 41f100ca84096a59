import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { COMMAND_USAGE, COMMANDS, USAGE } from '../../../src/cli/usage.js'

const root = fileURLToPath(new URL('../../../', import.meta.url))

/** The binary entry (src/cli.ts through tsx), as `mcp-edge …` runs it. */
function mcpEdge(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 30_000,
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

/**
 * Help is an answer, not a usage error: exit 0 on stdout, with no config needed. How fast it
 * prints is measured by `npm run bench:cli` (bench/cli-help.ts), not here.
 */
describe('mcp-edge help', () => {
  it.each([['--help'], ['-h'], ['help']])('mcp-edge %s prints the usage and exits 0', (flag) => {
    expect(mcpEdge(flag)).toEqual({ code: 0, stdout: USAGE, stderr: '' })
  })

  it.each([
    ['help', 'explain'],
    ['explain', '--help'],
    ['pin', '-h'],
    ['check', '--config', 'nowhere.yaml', '--help'],
  ])('mcp-edge %s %s prints that command’s usage and exits 0', (...args) => {
    const command = (args[0] === 'help' ? args[1] : args[0]) as keyof typeof COMMAND_USAGE
    expect(mcpEdge(...args)).toEqual({ code: 0, stdout: COMMAND_USAGE[command], stderr: '' })
  })

  it('refuses an unknown command, or none, with exit 2 and the usage on stderr', () => {
    expect(mcpEdge('nope')).toEqual({
      code: 2,
      stdout: '',
      stderr: `mcp-edge: unknown command nope\n\n${USAGE}`,
    })
    expect(mcpEdge()).toEqual({ code: 2, stdout: '', stderr: USAGE })
    expect(mcpEdge('help', 'nope').code).toBe(2)
    const noConfig = mcpEdge('check')
    expect(noConfig.code).toBe(2)
    expect(noConfig.stderr).toContain('--config FILE is required')
    expect(noConfig.stderr).toContain(COMMAND_USAGE.check)
  })

  it('names every option of every command in its usage, and every command in the global one', () => {
    const options: Record<(typeof COMMANDS)[number], readonly string[]> = {
      serve: ['--config'],
      check: ['--config'],
      explain: [
        '--config',
        '--server',
        '--tool',
        '--prompt',
        '--resource',
        '--skill',
        '--method',
        '--claims',
        '--args',
        '--scopes',
        '--json',
      ],
      pin: ['--config', '--lock', '--server', '--check'],
      tokens: ['--config', '--subject', '--server', '--all', '--json'],
      schema: ['--write'],
    }
    for (const command of COMMANDS) {
      expect(USAGE).toContain(`  ${command} `)
      for (const option of options[command]) {
        expect(COMMAND_USAGE[command]).toContain(option)
        if (command !== 'schema' && command !== 'serve' && command !== 'check')
          expect(USAGE).toContain(option)
      }
    }
  })
})
