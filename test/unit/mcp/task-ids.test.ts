import { describe, expect, it } from 'vitest'
import { parseMessage } from '../../../src/mcp/jsonrpc.js'
import {
  mayCarryTaskIds,
  openTaskRequest,
  taskIdHook,
  type TaskIdSealer,
} from '../../../src/mcp/task-ids.js'

/** A reversible stand-in for the real seal: `s:<id>`; ids starting with `z` are too long. */
const sealer: TaskIdSealer = {
  wrap: (id) => (id.startsWith('z') ? undefined : `s:${id}`),
  unwrap: (h) => (h.startsWith('s:') ? h.slice(2) : undefined),
}
const msg = (o: unknown) => parseMessage(Buffer.from(JSON.stringify(o)), 64)
const EXT = {
  'io.modelcontextprotocol/clientCapabilities': {
    extensions: { 'io.modelcontextprotocol/tasks': {} },
  },
}

describe('mayCarryTaskIds', () => {
  const call = (params: Record<string, unknown>) => ({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params,
  })
  const cases: [string, string, unknown, boolean][] = [
    [
      'tasks/get',
      'tasks/get',
      { jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: 'a' } },
      true,
    ],
    ['tasks/list', 'tasks/list', { jsonrpc: '2.0', id: 1, method: 'tasks/list' }, true],
    ['plain tools/call', 'tools/call', call({ name: 'x' }), false],
    ['2025 task-augmented call', 'tools/call', call({ name: 'x', task: { ttl: 1 } }), true],
    ['2026 call declaring the extension', 'tools/call', call({ name: 'x', _meta: EXT }), true],
    [
      '2026 call with other extensions',
      'tools/call',
      call({
        name: 'x',
        _meta: { 'io.modelcontextprotocol/clientCapabilities': { extensions: {} } },
      }),
      false,
    ],
    ['tools/list', 'tools/list', { jsonrpc: '2.0', id: 1, method: 'tools/list' }, false],
  ]
  it.each(cases)('%s', (_n, method, body, expected) => {
    expect(mayCarryTaskIds(method, msg(body), Buffer.alloc(0))).toBe(expected)
  })

  it('searches an unparsed tools/call body for the extension name', () => {
    const withExt = Buffer.from(JSON.stringify(call({ name: 'x', _meta: EXT })))
    expect(mayCarryTaskIds('tools/call', undefined, withExt)).toBe(true)
    expect(mayCarryTaskIds('tools/call', undefined, Buffer.from('{"params":{"name":"x"}}'))).toBe(
      false,
    )
  })
})

describe('taskIdHook', () => {
  const hook = taskIdHook(sealer)
  it('seals every place a task id travels, and only those', () => {
    const out = hook(
      {
        jsonrpc: '2.0',
        id: 1,
        result: {
          taskId: 'a',
          task: { taskId: 'b', status: 'working' },
          tasks: [{ taskId: 'c' }, { taskId: 'd' }],
          _meta: {
            'io.modelcontextprotocol/related-task': { taskId: 'e' },
            other: { taskId: 'f' },
          },
          content: [{ type: 'text', text: 'a' }],
        },
      },
      { sse: false },
    )
    expect(out?.['result']).toEqual({
      taskId: 's:a',
      task: { taskId: 's:b', status: 'working' },
      tasks: [{ taskId: 's:c' }, { taskId: 's:d' }],
      _meta: { 'io.modelcontextprotocol/related-task': { taskId: 's:e' }, other: { taskId: 'f' } },
      content: [{ type: 'text', text: 'a' }],
    })
  })

  it('leaves answers without task ids, and errors, untouched', () => {
    expect(hook({ jsonrpc: '2.0', id: 1, result: { content: [] } }, { sse: false })).toBeUndefined()
    expect(
      hook({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'x' } }, { sse: false }),
    ).toBeUndefined()
  })

  it('refuses (502) an id it cannot seal, or one that is not a string', () => {
    expect(() =>
      hook({ jsonrpc: '2.0', id: 1, result: { taskId: 'zz' } }, { sse: false }),
    ).toThrow()
    expect(() => hook({ jsonrpc: '2.0', id: 1, result: { taskId: 7 } }, { sse: false })).toThrow()
  })
})

describe('openTaskRequest', () => {
  it('forwards the backend id, keeps a big integer id byte for byte, and encodes Mcp-Name', () => {
    const text =
      '{"jsonrpc":"2.0","id":12345678901234567890,"method":"tasks/get","params":{"taskId":"s:Zürich"}}'
    const body = Buffer.from(text)
    const opened = openTaskRequest(parseMessage(body, 64), body, undefined, sealer)
    expect(opened?.body.toString()).toBe(
      '{"id":12345678901234567890,"jsonrpc":"2.0","method":"tasks/get","params":{"taskId":"Zürich"}}',
    )
    expect(opened?.mcpName).toBe(`=?base64?${Buffer.from('Zürich').toString('base64')}?=`)
    // A non-ASCII id travels in Mcp-Name only in the sentinel form (SEP-2243 §Encoding).
    const sentinel = `=?base64?${Buffer.from('s:Zürich').toString('base64')}?=`
    expect(openTaskRequest(parseMessage(body, 64), body, sentinel, sealer)?.body).toEqual(
      opened?.body,
    )
    expect(() => openTaskRequest(parseMessage(body, 64), body, 's:Zürich', sealer)).toThrow(
      expect.objectContaining({ code: 'header_mismatch' }),
    )
  })

  it('returns undefined for ids the caller was not given', () => {
    const body = Buffer.from(
      '{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"raw"}}',
    )
    expect(openTaskRequest(parseMessage(body, 64), body, 'raw', sealer)).toBeUndefined()
  })

  it.each([
    [{ taskId: 's:a', TASKID: 'b' }, 'case_variant_key'],
    [{ taskId: 1 }, 'invalid_params'],
    [{}, 'invalid_params'],
  ])('refuses params %o (%s)', (params, reason) => {
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params }))
    expect(() => openTaskRequest(parseMessage(body, 64), body, undefined, sealer)).toThrow(
      expect.objectContaining({ code: reason }),
    )
  })

  it('refuses an Mcp-Name that does not name params.taskId', () => {
    const body = Buffer.from(
      '{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"s:a"}}',
    )
    expect(() => openTaskRequest(parseMessage(body, 64), body, 's:b', sealer)).toThrow(
      expect.objectContaining({ code: 'header_mismatch' }),
    )
  })
})
