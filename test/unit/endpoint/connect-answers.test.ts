import { describe, expect, it } from 'vitest'
import type { Principal } from '../../../src/auth/principal.js'
import type { UserTokenSource } from '../../../src/auth/user-tokens.js'
import type { EndpointCall } from '../../../src/endpoint/call.js'
import { connectAnswer, ownRetry } from '../../../src/endpoint/connect-answers.js'
import { type GatewayError } from '../../../src/errors.js'
import { parseMessage } from '../../../src/mcp/jsonrpc.js'

const PRINCIPAL: Principal = {
  issuer: 'https://idp.example.com',
  subject: 'alice',
  claims: {},
  scopes: new Set(),
  token: 't',
}
const OURS = 'mcp-edge.ua1.sealed'
/** A source whose requestState is OURS, issued for tools/call only. */
const USERS: UserTokenSource = {
  service: 'Tracker',
  authorization: () => Promise.resolve(undefined),
  refused: () => Promise.resolve(undefined),
  drop: () => Promise.resolve(),
  connected: () => Promise.resolve(undefined),
  connectUrl: () => 'https://mcp.example.com/connect/tracker?state=abc',
  requestState: () => OURS,
  issued: (_p, method, state) => state === OURS && method === 'tools/call',
  connectWaitMs: 0,
}

function call(text: string, era: 'modern' | 'legacy' = 'modern'): EndpointCall {
  const body = Buffer.from(text)
  const message = parseMessage(body, 64)
  return {
    http: 'POST',
    requestId: 'r',
    mcp: {
      era,
      version: era === 'modern' ? '2026-07-28' : '2025-11-25',
      method: message.method,
      kind: 'request',
      targets: [],
      verified: true,
      message,
    },
    head: { forward: [], host: undefined } as unknown as EndpointCall['head'],
    body,
    principal: PRINCIPAL,
    peer: undefined,
    headers: {},
    trace: undefined,
    span: () => ({}) as ReturnType<EndpointCall['span']>,
  }
}

const URL_CAPS = '"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}'

describe('connect answers (endpoint/connect-answers.ts)', () => {
  it('takes the gateway’s own requestState and input response out, every other byte kept', () => {
    const cases = [
      `{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"x","requestState":"${OURS}","inputResponses":{"connect:tracker":{"action":"accept"}},"arguments":{"a":1}}}`,
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"requestState" : "${OURS}" , "name":"x","inputResponses":{"connect:tracker":{"action":"accept"}}}}`,
      `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","inputResponses":{"connect:tracker":{"action":"accept"}},"requestState":"${OURS}"}}`,
    ]
    for (const text of cases) {
      const retry = ownRetry(call(text), 'tracker', USERS, PRINCIPAL)
      expect(retry.answer).toBe('accept')
      const out = retry.call.body.toString()
      expect(out).not.toContain('requestState')
      expect(out).not.toContain('inputResponses')
      const parsed = JSON.parse(out) as { id: unknown; params: Record<string, unknown> }
      expect(Object.keys(parsed.params)).not.toContain('requestState')
      expect(retry.call.mcp.message?.params?.requestState).toBeUndefined()
    }
    // The big id stays byte for byte.
    expect(ownRetry(call(cases[0]!), 'tracker', USERS, PRINCIPAL).call.body.toString()).toContain(
      '"id":9007199254740993',
    )
  })

  it('leaves another party’s requestState alone; another method’s is no answer', () => {
    const theirs = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":"server-state"}}`
    const kept = ownRetry(call(theirs), 'tracker', USERS, PRINCIPAL)
    expect(kept.answer).toBe('none')
    expect(kept.call.body.toString()).toBe(theirs)
    const other = `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"x","requestState":"${OURS}","inputResponses":{"connect:tracker":{"action":"accept"}}}}`
    const r = ownRetry(call(other), 'tracker', USERS, PRINCIPAL)
    expect(r.answer).toBe('none')
    expect(r.call.body.toString()).not.toContain('requestState')
    const declined = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","requestState":"${OURS}","inputResponses":{"connect:tracker":{"action":"decline"}}}}`
    expect(ownRetry(call(declined), 'tracker', USERS, PRINCIPAL).answer).toBe('decline')
  })

  it('asks in the era’s own way', () => {
    const modern = connectAnswer(
      call(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x",${URL_CAPS}}}`),
      'tracker',
      USERS,
      PRINCIPAL,
    )
    const result = JSON.parse(modern.body) as { id: string; result: Record<string, unknown> }
    expect(result.id).toBe('a')
    expect(result.result).toMatchObject({
      resultType: 'input_required',
      requestState: OURS,
      inputRequests: {
        'connect:tracker': {
          method: 'elicitation/create',
          params: { mode: 'url', url: 'https://mcp.example.com/connect/tracker?state=abc' },
        },
      },
    })
    const codeOf = (text: string, era: 'modern' | 'legacy' = 'modern') => {
      try {
        connectAnswer(call(text, era), 'tracker', USERS, PRINCIPAL)
        return 'answered'
      } catch (err) {
        return (err as GatewayError).code
      }
    }
    expect(codeOf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)).toBe(
      'elicitation_not_supported',
    )
    expect(codeOf(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{${URL_CAPS}}}`)).toBe(
      'user_connect_required',
    )
    expect(
      codeOf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, 'legacy'),
    ).toBe('url_elicitation_required')
    expect(codeOf(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`)).toBe(
      'answered',
    )
  })
})
