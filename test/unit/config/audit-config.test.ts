import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../../src/runtime/load.js'

const load = (audit: unknown, env: Record<string, string> = {}) =>
  parseConfigText(
    stringify({ servers: { app: { upstreams: [{ url: 'http://127.0.0.1:1/mcp' }] } }, audit }),
    { dir: process.cwd(), env },
  ).config.audit

describe('audit: config', () => {
  it('writes no arguments unless asked, with a 4 KiB cap and no extra rules', () => {
    expect(load(undefined)).toEqual({
      arguments: 'none',
      maxArgumentBytes: 4096,
      redaction: { paths: [], keys: [] },
    })
  })

  it('takes a mode, paths, key patterns and the hash key from the environment', () => {
    const audit = load(
      {
        arguments: 'redacted',
        maxArgumentBytes: 1024,
        redaction: {
          paths: ['$.credentials.secret', '$.cards[*].pan'],
          keys: ['ssn'],
          hashKey: '${AUDIT_KEY}',
        },
      },
      { AUDIT_KEY: 'a-key-of-enough-length' },
    )
    expect(audit.redaction).toEqual({
      paths: ['$.credentials.secret', '$.cards[*].pan'],
      keys: ['ssn'],
      hashKey: 'a-key-of-enough-length',
    })
  })

  it('refuses a path outside the documented syntax, naming it', () => {
    expect(() =>
      load({ arguments: 'redacted', redaction: { paths: ['credentials.secret'] } }),
    ).toThrow('audit.redaction.paths[0]: a path starts with $')
    expect(() => load({ redaction: { paths: ['$..secret'] } })).toThrow('audit.redaction.paths[0]')
  })

  it('refuses unknown keys, unknown modes, short hash keys and tiny caps', () => {
    expect(() => load({ argument: 'full' })).toThrow('audit.argument: unknown key')
    expect(() => load({ arguments: 'some' })).toThrow('audit.arguments')
    expect(() => load({ redaction: { hashKey: 'short' } })).toThrow('audit.redaction.hashKey')
    expect(() => load({ maxArgumentBytes: 10 })).toThrow('audit.maxArgumentBytes')
    expect(() => load({ redaction: { keys: [''] } })).toThrow('audit.redaction.keys[0]')
  })
})
