import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { explainCommand } from '../../../src/cli/explain.js'
import { tempFolder } from '../policy/fixtures.js'

const CONFIG = `
servers:
  weather:
    upstreams: [{ url: "http://127.0.0.1:1/mcp" }]
    timeouts:
      responseHeadersMs: 20000
      methods: { "tools/call": 30000, "resources/*": 5000 }
      tools: { "slow_*": 600000, slow_report: 900000 }
      prompts: { "draft_*": 45000 }
  docs: { upstreams: [{ url: "http://127.0.0.1:2/mcp" }] }
virtualServers:
  workspace: { members: [weather, docs], prefix: always }
`

function run(args: string[]): { code: number; out: string } {
  const dir = tempFolder({ 'gateway.yaml': CONFIG })
  let out = ''
  const file = join(dir, 'gateway.yaml')
  const code = explainCommand(file, ['--config', file, ...args], {
    out: (t) => void (out += t),
    err: () => undefined,
  })
  return { code, out }
}

describe('mcp-edge explain: the deadline that applies', () => {
  it('names the most specific key: the tool, a pattern, the method, or the server default', () => {
    expect(run(['--server', 'weather', '--tool', 'slow_report']).out).toContain(
      'deadline: 900000 ms to the response head and for a streamed answer whole (timeouts.tools["slow_report"])\n',
    )
    expect(run(['--server', 'weather', '--tool', 'slow_export']).out).toContain(
      '(timeouts.tools["slow_*"])',
    )
    expect(run(['--server', 'weather', '--tool', 'get_forecast']).out).toContain(
      'deadline: 30000 ms to the response head and for a streamed answer whole (timeouts.methods["tools/call"])\n',
    )
    expect(run(['--server', 'weather', '--prompt', 'draft_mail']).out).toContain(
      'deadline: 45000 ms',
    )
    expect(run(['--server', 'weather', '--resource', 'docs://a']).out).toContain(
      '(timeouts.methods["resources/*"])',
    )
    expect(run(['--server', 'weather', '--method', 'tools/list']).out).toContain(
      'deadline: 20000 ms to the response head (timeouts.responseHeadersMs;',
    )
    expect(run(['--server', 'weather', '--method', 'subscriptions/listen']).out).toContain(
      'deadline: none (a long-lived stream;',
    )
  })

  it('in JSON, and for a virtual server the member deadline', () => {
    const json = JSON.parse(run(['--server', 'weather', '--tool', 'slow_x', '--json']).out) as {
      deadline: unknown
    }
    expect(json.deadline).toEqual({
      ms: 600000,
      source: 'timeouts.tools["slow_*"]',
      covers: 'answer',
    })
    const v = run(['--server', 'workspace', '--tool', 'weather_slow_x'])
    expect(v.out).toContain('member "weather"')
    expect(v.out).toContain('(timeouts.tools["slow_*"])')
    const d = run(['--server', 'workspace', '--tool', 'docs_slow_x'])
    expect(d.out).toContain('deadline: 30000 ms to the response head (timeouts.responseHeadersMs;')
  })
})
