import { describe, expect, it } from 'vitest'
import type { GatewayError } from '../../../src/errors.js'
import type { JsonRpcMessage } from '../../../src/mcp/jsonrpc.js'
import { SessionCodec } from '../../../src/upstream/sessions.js'
import { openMemberTask, VirtualTaskCodec } from '../../../src/virtual/tasks.js'

const KEY = Buffer.from('a-test-key-of-at-least-16-chars')
const ALICE = { issuer: 'https://idp', subject: 'alice' }

describe('VirtualTaskCodec', () => {
  it('carries the member and its task id, and one task keeps one id', () => {
    const codec = new VirtualTaskCodec(KEY, 'workspace')
    const handle = codec.seal('weather', 'task-1', ALICE) as string
    expect(handle).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(handle).not.toContain('task-1')
    expect(handle).not.toContain('weather')
    expect(codec.seal('weather', 'task-1', ALICE)).toBe(handle)
    expect(new VirtualTaskCodec(KEY, 'workspace').open(handle, ALICE)).toEqual({
      member: 'weather',
      taskId: 'task-1',
    })
    // The length prefix keeps the cut exact whatever the names contain.
    const odd = codec.seal('a:1', '2:b', undefined) as string
    expect(codec.open(odd, undefined)).toEqual({ member: 'a:1', taskId: '2:b' })
    expect(codec.seal('docs', 'task-1', ALICE)).not.toBe(handle)
  })

  it('opens for nobody else: caller, virtual server, key, the member endpoint, any change', () => {
    const codec = new VirtualTaskCodec(KEY, 'workspace')
    const handle = codec.seal('weather', 'task-1', ALICE) as string
    expect(codec.open(handle, { ...ALICE, subject: 'bob' })).toBeUndefined()
    expect(codec.open(handle, undefined)).toBeUndefined()
    expect(new VirtualTaskCodec(KEY, 'other').open(handle, ALICE)).toBeUndefined()
    const otherKey = Buffer.from('another-key-of-16-chars!')
    expect(new VirtualTaskCodec(otherKey, 'workspace').open(handle, ALICE)).toBeUndefined()
    // A virtual server named like a server still uses another key: neither opens the other's.
    const direct = new SessionCodec(KEY, 'workspace', [])
    expect(direct.openTask(handle, ALICE)).toBeUndefined()
    const directHandle = direct.sealTask('task-1', ALICE) as string
    expect(codec.open(directHandle, ALICE)).toBeUndefined()
    for (let i = 0; i < handle.length; i += 7) {
      const flipped = handle.slice(0, i) + (handle[i] === 'A' ? 'B' : 'A') + handle.slice(i + 1)
      expect(codec.open(flipped, ALICE)).toBeUndefined()
    }
    expect(codec.open('task-1', ALICE)).toBeUndefined()
    expect(codec.open('A'.repeat(2000), ALICE)).toBeUndefined()
  })

  it('refuses to seal an id too long to hand out', () => {
    const codec = new VirtualTaskCodec(KEY, 'workspace')
    expect(codec.seal('weather', 'x'.repeat(513), ALICE)).toBeUndefined()
    expect(codec.seal('weather', 'x'.repeat(512), ALICE)).toBeDefined()
  })

  it("sealerFor unwraps only its own member's tasks", () => {
    const codec = new VirtualTaskCodec(KEY, 'workspace')
    const weather = codec.sealerFor('weather', ALICE)
    const handle = weather.wrap('task-1') as string
    expect(weather.unwrap(handle)).toBe('task-1')
    expect(codec.sealerFor('docs', ALICE).unwrap(handle)).toBeUndefined()
  })
})

function request(text: string): JsonRpcMessage {
  const parsed = JSON.parse(text) as { method: string; params: Record<string, unknown> }
  return {
    kind: 'request',
    method: parsed.method,
    params: parsed.params,
    rawId: '12345678901234567890',
  }
}

describe('openMemberTask', () => {
  const codec = new VirtualTaskCodec(KEY, 'workspace')
  const handle = codec.seal('weather', 'täsk "1"', ALICE) as string

  it('replaces only params.taskId in the raw text', () => {
    const text = `{"jsonrpc":"2.0","id":12345678901234567890,"method":"tasks/get","params":{ "taskId" : "${handle}","_meta":{"n":1.50}}}`
    const opened = openMemberTask(request(text), text, handle, codec, ALICE)
    expect(opened).toEqual({
      member: 'weather',
      taskId: 'täsk "1"',
      text: `{"jsonrpc":"2.0","id":12345678901234567890,"method":"tasks/get","params":{ "taskId" : "täsk \\"1\\"","_meta":{"n":1.50}}}`,
    })
  })

  it('is undefined for a handle the caller was not given', () => {
    const text = `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"${handle}"}}`
    expect(openMemberTask(request(text), text, undefined, codec, undefined)).toBeUndefined()
  })

  it('refuses a case variant of taskId, a mismatching Mcp-Name and a missing id', () => {
    const variant = `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"${handle}","TaskId":"x"}}`
    expect(() => openMemberTask(request(variant), variant, undefined, codec, ALICE)).toThrow(
      expect.objectContaining({ code: 'case_variant_key' }) as GatewayError,
    )
    const text = `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"${handle}"}}`
    expect(() => openMemberTask(request(text), text, 'other', codec, ALICE)).toThrow(
      expect.objectContaining({ code: 'header_mismatch' }) as GatewayError,
    )
    const none = '{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":7}}'
    expect(() => openMemberTask(request(none), none, undefined, codec, ALICE)).toThrow(
      expect.objectContaining({ code: 'invalid_params' }) as GatewayError,
    )
  })
})
