import { describe, expect, it } from 'vitest'
import { connectClient, connectLegacyClient } from '../helpers/clients.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { openConnectLink, userAuthWorld as world } from '../helpers/user-auth.js'

describe('per-user credentials (userAuth)', () => {
  it('2026-07-28: the first call asks to connect; after the connect page it runs as that user', async () => {
    const w = await world()
    const token = await w.token('alice')
    const client = await closing(
      connectClient(w.gw.mcpUrl('tracker'), {
        auth: token,
        capabilities: { elicitation: { url: {} } },
      }),
    )
    const prompts: { url: string; message: string }[] = []
    client.setRequestHandler('elicitation/create', async (req) => {
      const params = req.params as { mode: string; url: string; message: string }
      prompts.push(params)
      const outcome = await openConnectLink(params.url, w.idp, w.as, 'alice')
      expect(outcome.status).toBe(200)
      expect(outcome.page).toContain('Tracker')
      return { action: 'accept' }
    })
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    expect(textOf(result)).toBe('user:alice')
    expect(prompts).toHaveLength(1)
    expect(prompts[0]?.message).toContain('Tracker')
    expect(w.tracker.served).toEqual(['alice'])
  })

  it('2025-11-25: initialize answers -32042 naming the connect page; connected, calls run as the user', async () => {
    const w = await world()
    const token = await w.token('bob')
    const err = await connectLegacyClient(w.gw.mcpUrl('tracker'), {
      auth: token,
      capabilities: { elicitation: { url: {} } },
    }).catch((e: unknown) => e)
    const elicitations = (err as { elicitations?: { url: string }[] }).elicitations
    expect((err as { code?: number }).code).toBe(-32042)
    const url = elicitations?.[0]?.url ?? ''
    expect(url.startsWith(`${w.gw.url}/connect/tracker?state=`)).toBe(true)
    expect(w.tracker.requests).toHaveLength(0)
    const outcome = await openConnectLink(url, w.idp, w.as, 'bob')
    expect(outcome.status).toBe(200)
    const client = await closing(connectLegacyClient(w.gw.mcpUrl('tracker'), { auth: token }))
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    expect(textOf(result)).toBe('user:bob')
  })
})

describe('per-user credentials: users, refresh and refusals', () => {
  it('a second user gets a prompt of their own and their own account', async () => {
    const w = await world()
    const connect = async (account: string) => {
      const client = await closing(
        connectClient(w.gw.mcpUrl('tracker'), {
          auth: await w.token(account),
          capabilities: { elicitation: { url: {} } },
        }),
      )
      const prompted: string[] = []
      client.setRequestHandler('elicitation/create', async (req) => {
        const url = (req.params as { url: string }).url
        prompted.push(url)
        await openConnectLink(url, w.idp, w.as, account)
        return { action: 'accept' }
      })
      return { client, prompted }
    }
    const alice = await connect('alice')
    expect(textOf(await alice.client.callTool({ name: 'whoami', arguments: {} }))).toBe(
      'user:alice',
    )
    const bob = await connect('bob')
    expect(textOf(await bob.client.callTool({ name: 'whoami', arguments: {} }))).toBe('user:bob')
    // Each asked once; alice is not asked again, and each runs as themselves.
    expect(textOf(await alice.client.callTool({ name: 'whoami', arguments: {} }))).toBe(
      'user:alice',
    )
    expect(alice.prompted).toHaveLength(1)
    expect(bob.prompted).toHaveLength(1)
    expect(alice.prompted[0]).not.toBe(bob.prompted[0])
    expect(w.tracker.served).toEqual(['alice', 'bob', 'alice'])
    expect(w.as.signIns.get('alice')).toBe(1)
    expect(w.as.signIns.get('bob')).toBe(1)
  })

  it('refreshes a token before it expires (single flight), and audits it', async () => {
    let now = Date.now()
    const w = await world({ now: () => now })
    const token = await w.token('alice')
    const client = await closing(
      connectClient(w.gw.mcpUrl('tracker'), {
        auth: token,
        capabilities: { elicitation: { url: {} } },
      }),
    )
    client.setRequestHandler('elicitation/create', async (req) => {
      await openConnectLink((req.params as { url: string }).url, w.idp, w.as, 'alice')
      return { action: 'accept' }
    })
    await client.callTool({ name: 'whoami', arguments: {} })
    expect(w.as.grants.filter((g) => g === 'refresh_token')).toHaveLength(0)
    // Past `expires_in` (300 s) minus refreshBeforeMs (60 s): refreshed before it is sent.
    now += 250_000
    const calls = await Promise.all(
      [1, 2, 3].map(() => client.callTool({ name: 'whoami', arguments: {} })),
    )
    expect(calls.map(textOf)).toEqual(['user:alice', 'user:alice', 'user:alice'])
    expect(w.as.grants.filter((g) => g === 'refresh_token')).toHaveLength(1)
    const audit = w.gw.logs.filter((l) => l['decision'] === 'user_token')
    expect(audit.map((l) => l['action'])).toEqual(['connect', 'refresh'])
    expect(audit[1]).toMatchObject({
      audit: true,
      sub: 'alice',
      iss: w.idp.issuer,
      server: 'tracker',
    })
  })

  it('an upstream 401 costs one refresh and the same request once more', async () => {
    const w = await world()
    const client = await closing(
      connectClient(w.gw.mcpUrl('tracker'), {
        auth: await w.token('alice'),
        capabilities: { elicitation: { url: {} } },
      }),
    )
    let prompts = 0
    client.setRequestHandler('elicitation/create', async (req) => {
      prompts++
      await openConnectLink((req.params as { url: string }).url, w.idp, w.as, 'alice')
      return { action: 'accept' }
    })
    await client.callTool({ name: 'whoami', arguments: {} })
    const before = w.tracker.calls('tools/call').length
    w.tracker.refuseNext = 1
    expect(textOf(await client.callTool({ name: 'whoami', arguments: {} }))).toBe('user:alice')
    expect(w.tracker.calls('tools/call').length - before).toBe(2) // refused once, then served
    expect(w.as.grants.filter((g) => g === 'refresh_token')).toHaveLength(1)
    // Refused again after the refresh: the token is dropped, and the next call asks again.
    w.tracker.refuseNext = 2
    const failed = await client.callTool({ name: 'whoami', arguments: {} }).catch((e: unknown) => e)
    expect(failed).toBeInstanceOf(Error)
    expect(w.gw.logs.some((l) => l['action'] === 'drop' && l['reason'] === 'upstream_401')).toBe(
      true,
    )
    expect(prompts).toBe(1)
    expect(textOf(await client.callTool({ name: 'whoami', arguments: {} }))).toBe('user:alice')
    expect(prompts).toBe(2)
  })

  it('a refresh the AS refuses (invalid_grant) drops the token; the next call asks again', async () => {
    let now = Date.now()
    const w = await world({ now: () => now })
    const client = await closing(
      connectClient(w.gw.mcpUrl('tracker'), {
        auth: await w.token('alice'),
        capabilities: { elicitation: { url: {} } },
      }),
    )
    let prompts = 0
    client.setRequestHandler('elicitation/create', async (req) => {
      prompts++
      await openConnectLink((req.params as { url: string }).url, w.idp, w.as, 'alice')
      return { action: 'accept' }
    })
    await client.callTool({ name: 'whoami', arguments: {} })
    // Another client id at the same AS: the stored refresh token is not its own (invalid_grant).
    const other = await w.as.register([`${w.gw.url}/connect/tracker/callback`])
    await w.reload({ userAuth: other })
    now += 250_000
    expect(textOf(await client.callTool({ name: 'whoami', arguments: {} }))).toBe('user:alice')
    expect(prompts).toBe(2)
    expect(w.gw.logs.some((l) => l['action'] === 'drop' && l['reason'] === 'invalid_grant')).toBe(
      true,
    )
  })
})
