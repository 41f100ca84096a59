import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../../', import.meta.url))

/** Runs the real binary entry (src/cli.ts through tsx), as `mcp-edge …` would. */
function mcpEdge(...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 30_000,
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

// Each run starts Node and compiles the CLI through tsx: seconds on a busy 2-core machine.
describe('mcp-edge explain (the binary)', { timeout: 60_000 }, () => {
  it('explains a denial of the embedded default and exits 3', () => {
    const r = mcpEdge(
      'explain',
      '--config',
      'deploy/gateway.demo.yaml',
      '--claims',
      '{"sub":"alice","groups":["eng"]}',
      '--server',
      'weather',
      '--tool',
      'delete_station',
    )
    expect(r.stderr).toBe('')
    expect(r.code).toBe(3)
    expect(r.stdout).toContain('decision: deny\n')
    expect(r.stdout).toContain('rule: no-deletes-anywhere (../policies/default.yaml rules[3])\n')
  })

  it('explains an allow and exits 0; a usage error exits 2', () => {
    const ok = mcpEdge(
      'explain',
      '--config',
      'deploy/gateway.demo.yaml',
      '--server',
      'docs',
      '--resource',
      'docs://readme',
    )
    expect(ok.code).toBe(0)
    expect(ok.stdout).toContain('rule: everyone-uses-docs')
    expect(
      mcpEdge('explain', '--config', 'deploy/gateway.demo.yaml', '--server', 'docs').code,
    ).toBe(2)
  })
})
