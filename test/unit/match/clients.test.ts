import { describe, expect, it } from 'vitest'
import { clientIdOf, compileClientGates } from '../../../src/match/clients.js'
import { ruleWhen } from '../../../src/match/schema.js'
import { compileWhen } from '../../../src/match/when.js'

const caller = (claims: Record<string, unknown>) => ({ subject: 's', issuer: 'i', claims })

describe('client applications (azp, else client_id)', () => {
  it.each([
    [{ azp: 'web', client_id: 'cli' }, 'web'],
    [{ client_id: 'cli' }, 'cli'],
    // A present azp decides; a non-string one names no client (never the friendlier client_id).
    [{ azp: 7, client_id: 'cli' }, undefined],
    [{ azp: null, client_id: 'cli' }, undefined],
    [{ azp: '', client_id: 'cli' }, undefined],
    [{ client_id: '' }, undefined],
    [{ azp: 'web', client_id: null }, 'web'],
    [{ client_id: ['cli'] }, undefined],
    [{}, undefined],
  ])('%j → %s', (claims, id) => {
    expect(clientIdOf(caller(claims))).toBe(id)
  })

  it('reads own claims only', () => {
    const claims = Object.create({ azp: 'inherited' }) as Record<string, unknown>
    expect(clientIdOf(caller(claims))).toBeUndefined()
    expect(clientIdOf(undefined)).toBeUndefined()
  })

  it('when: clients exactly, claims and clients together, nothing for an anonymous caller', () => {
    const both = compileWhen(ruleWhen.parse({ claims: { role: 'admin' }, clients: ['console-*'] }))
    expect(both(caller({ role: 'admin', azp: 'console-web' }))).toBe(true)
    expect(both(caller({ role: 'admin', azp: 'Console-web' }))).toBe(false)
    expect(both(caller({ role: 'user', azp: 'console-web' }))).toBe(false)
    const clients = compileWhen(ruleWhen.parse({ clients: ['ide'] }))
    expect(clients(caller({ client_id: 'ide' }))).toBe(true)
    expect(clients(caller({ client_id: 'ide ' }))).toBe(false)
    expect(clients(undefined)).toBe(false)
    expect(ruleWhen.safeParse({}).success).toBe(false)
    expect(ruleWhen.safeParse({ clients: [] }).success).toBe(false)
    expect(ruleWhen.safeParse({ client: ['x'] }).success).toBe(false)
  })

  it('a virtual endpoint requires every member list', () => {
    const gates = compileClientGates({
      servers: { a: { clients: ['ide', 'web'] }, b: { clients: ['web'] }, c: {} },
      virtualServers: { v: { members: ['a', 'b', 'c'] }, open: { members: ['c'] } },
    })
    expect(gates.get('a')?.(caller({ azp: 'ide' }))).toBe(true)
    expect(gates.get('v')?.(caller({ azp: 'ide' }))).toBe(false)
    expect(gates.get('v')?.(caller({ azp: 'web' }))).toBe(true)
    expect(gates.has('c')).toBe(false)
    expect(gates.has('open')).toBe(false)
  })
})
