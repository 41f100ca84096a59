import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../../src/runtime/load.js'

describe('timeouts.methods keys the config refuses', () => {
  const load = (methods: Record<string, number>) => () =>
    parseConfigText(
      stringify({
        servers: { app: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }], timeouts: { methods } } },
      }),
      { dir: process.cwd(), env: {} },
    )

  it('a notification, a long-lived stream, a near-miss of a method name', () => {
    expect(load({ 'notifications/progress': 1000 })).toThrow(
      'servers.app.timeouts.methods.notifications/progress: a notification has no answer to wait for',
    )
    expect(load({ 'subscriptions/listen': 1000 })).toThrow('a long-lived stream has no deadline')
    expect(load({ 'Tools/Call': 1000 })).toThrow('not a method name')
    expect(load({ 'tools.call': 1000 })).toThrow('not a method name')
    expect(load({ 'tools/call': 0 })).toThrow()
  })

  it('takes methods, patterns and extra methods', () => {
    expect(
      load({ 'tools/call': 1000, 'resources/*': 5000, '*': 9000, 'x-vendor/run': 1 }),
    ).not.toThrow()
  })
})
