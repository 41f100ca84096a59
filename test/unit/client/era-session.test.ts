import { describe, expect, it } from 'vitest'
import type { ClientSession } from '../../../src/client/era-session.js'
import {
  legacyHeaders,
  memberSessionKey,
  sendInLegacySession,
  type EraAnswer,
  type SessionHeaders,
} from '../../../src/client/era-session.js'
import { MemberSessions } from '../../../src/client/member-sessions.js'

const CLIENT: ClientSession = {
  id: 'abc',
  version: '2025-06-18',
  capabilities: { roots: {} },
  clientInfo: { name: 'c', version: '1' },
}
const HEADERS = [
  'content-type',
  'application/json',
  'MCP-Protocol-Version',
  '2026-07-28',
  'mcp-method',
  'tools/call',
  'mcp-name',
  'echo',
  'Mcp-Param-Region',
  'eu',
  'authorization',
  'Bearer member-token',
]

/** A 2025-era member that issues session ids and forgets them on demand. */
function legacyMember() {
  const sent: { headers: string[]; body: Record<string, unknown> }[] = []
  const known = new Set<string>()
  let next = 0
  // The header list the member path sends: the member headers with the session's put on.
  const send = async (session: SessionHeaders, body: Buffer): Promise<EraAnswer> => {
    const headers = legacyHeaders(HEADERS, session)
    const msg = JSON.parse(body.toString()) as Record<string, unknown>
    sent.push({ headers: [...headers], body: msg })
    const h = new Map<string, string>()
    for (let i = 0; i < headers.length; i += 2)
      h.set((headers[i] as string).toLowerCase(), headers[i + 1] as string)
    if (msg.method === 'initialize') {
      const sid = `s${next++}`
      known.add(sid)
      return {
        status: 200,
        sessionId: sid,
        message: { id: msg.id, result: { protocolVersion: '2025-06-18' } },
      }
    }
    if (!known.has(h.get('mcp-session-id') ?? ''))
      return { status: 404, message: { id: msg.id, error: {} } }
    if (msg.id === undefined) return { status: 202, message: undefined }
    return { status: 200, message: { id: msg.id, result: { ok: h.get('mcp-session-id') } } }
  }
  return { send, sent, known }
}

describe('2025-only members', () => {
  it('swaps the era headers and drops the 2026 routing headers', () => {
    // Remade by the one builder of the gateway's own requests (mcp/outbound.ts): what says what
    // the request is comes last, set anew.
    expect(legacyHeaders(HEADERS, { sessionId: 'x', version: '2025-11-25' })).toEqual([
      'authorization',
      'Bearer member-token',
      'content-type',
      'application/json',
      'accept',
      'application/json, text/event-stream',
      'mcp-protocol-version',
      '2025-11-25',
      'mcp-session-id',
      'x',
    ])
  })

  it('initialises once per client session, with the client’s version and usable capabilities', async () => {
    const m = legacyMember()
    const sessions = new MemberSessions()
    const body = Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/call"}')
    const key = memberSessionKey(CLIENT, 'sub alice')
    const [a, b] = await Promise.all([
      sendInLegacySession(sessions, key, 'tickets', CLIENT, m.send, body, '1'),
      sendInLegacySession(sessions, key, 'tickets', CLIENT, m.send, body, '1'),
    ])
    expect(a.message?.result).toEqual({ ok: 's0' })
    expect(b.message?.result).toEqual({ ok: 's0' })
    const inits = m.sent.filter((s) => s.body.method === 'initialize')
    expect(inits).toHaveLength(1)
    expect(inits[0]?.body.params).toEqual({
      protocolVersion: '2025-06-18',
      // `roots` is answered by the client to the member's requests, which are not relayed.
      capabilities: {},
      clientInfo: { name: 'c', version: '1' },
    })
    expect(m.sent.filter((s) => s.body.method === 'notifications/initialized')).toHaveLength(1)
  })

  it('re-initialises when the member answers 404 for its session', async () => {
    const m = legacyMember()
    const sessions = new MemberSessions()
    const body = Buffer.from('{"jsonrpc":"2.0","id":7,"method":"tools/list"}')
    const key = memberSessionKey(undefined, 'addr 127.0.0.1')
    await sendInLegacySession(sessions, key, 'tickets', undefined, m.send, body, '7')
    m.known.clear() // the member restarted
    const again = await sendInLegacySession(sessions, key, 'tickets', undefined, m.send, body, '7')
    expect(again.status).toBe(200)
    expect(again.message?.result).toEqual({ ok: 's1' })
    const ended = await sessions.end(key)
    expect(ended.map(([name, sess]) => [name, sess.sessionId, sess.version])).toEqual([
      ['tickets', 's1', '2025-06-18'],
    ])
    expect(sessions.size).toBe(0)
  })

  it('keeps 2026 callers apart: one member session per caller', () => {
    expect(memberSessionKey(undefined, 'sub a')).not.toBe(memberSessionKey(undefined, 'sub b'))
    expect(memberSessionKey(CLIENT, 'sub a')).toBe(memberSessionKey(CLIENT, 'sub b'))
  })
})
