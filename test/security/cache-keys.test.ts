import { describe, expect, it } from 'vitest'
import { envelope, mcpHeaders, rawPost, type RawResponse } from '../helpers/clients.js'
import { startNonValidatingBackend, type NonValidatingBackend } from '../helpers/sdk-servers.js'
import { cacheGateway } from '../helpers/cache.js'
import { closing } from '../helpers/lifecycle.js'

/**
 * The cache key must tell apart every two requests a backend could answer differently (caching.mdx
 * §Cache Key: "the request parameters that affect the result"). The backend here answers each
 * tools/list with the exact params text it received, so an answer served for the wrong request
 * shows in the body, and the call count shows whether the second request reached the backend.
 */

/** A public, cacheable list whose only tool's description is the params text the backend read. */
async function echoingBackend(): Promise<NonValidatingBackend> {
  return closing(
    startNonValidatingBackend({
      behaviour: (req) => {
        const text = req.body.toString('utf8')
        const id = /"id":(\d+)/.exec(text)?.[1] ?? 'null'
        const params = /"params":(.*)}$/.exec(text)?.[1] ?? ''
        const result = {
          tools: [{ name: 'echo', description: params, inputSchema: { type: 'object' } }],
          resultType: 'complete',
          ttlMs: 60_000,
          cacheScope: 'public',
        }
        return {
          status: 200,
          headers: { 'content-type': 'application/json' },
          body: `{"jsonrpc":"2.0","id":${id},"result":${JSON.stringify(result)}}`,
        }
      },
    }),
  )
}

/**
 * POSTs tools/list with `members` spliced verbatim into params (before `_meta`), so the test
 * controls the exact bytes: big integers, escapes, duplicate and prototype-named keys.
 */
function list(
  url: string,
  id: number,
  members: string,
  meta: Record<string, unknown> = {},
): Promise<RawResponse> {
  const m = JSON.stringify(envelope(meta))
  const params = members === '' ? `{"_meta":${m}}` : `{${members},"_meta":${m}}`
  const body = `{"jsonrpc":"2.0","id":${id},"method":"tools/list","params":${params}}`
  return rawPost(url, body, mcpHeaders('tools/list'))
}

/** The params text the backend saw for the request this answer came from. */
function seen(res: RawResponse): string {
  expect(res.status, res.text).toBe(200)
  const result = res.response().result as { tools: { description: string }[] }
  return result.tools[0]?.description ?? ''
}

/** Sends `a` then `b`: both must reach the backend, and `b` must get its own answer. */
async function expectDistinct(a: string, b: string, metaA = {}, metaB = {}): Promise<void> {
  const backend = await echoingBackend()
  const gw = await cacheGateway(backend.url)
  const first = await list(gw.app, 1, a, metaA)
  const second = await list(gw.app, 2, b, metaB)
  expect(backend.calls('tools/list')).toHaveLength(2)
  expect(seen(second)).not.toBe(seen(first))
  // and each is now its own entry: a repeat of `a` is a hit on a's answer, not b's
  const again = await list(gw.app, 3, a, metaA)
  expect(seen(again)).toBe(seen(first))
  expect(backend.calls('tools/list')).toHaveLength(2)
}

/** Sends `a` then `b`: `b` is a hit on `a`'s entry. */
async function expectShared(a: string, b: string, metaA = {}, metaB = {}): Promise<void> {
  const backend = await echoingBackend()
  const gw = await cacheGateway(backend.url)
  const first = await list(gw.app, 1, a, metaA)
  const second = await list(gw.app, 2, b, metaB)
  expect(second.status).toBe(200)
  expect(seen(second)).toBe(seen(first))
  expect(backend.calls('tools/list')).toHaveLength(1)
}

describe('cache keys: requests a backend may answer differently never share an entry', () => {
  it('integers past 2^53 keep every digit (page 2^53 is not the 2^53+1 entry)', async () => {
    await expectDistinct('"page":9007199254740993', '"page":9007199254740992')
  })

  it('big integers nested in objects and arrays keep every digit', async () => {
    await expectDistinct(
      '"filter":{"ids":[12345678901234567890]}',
      '"filter":{"ids":[12345678901234567000]}',
    )
  })

  it('numbers are keyed as written: 1 and 1.0 are different to an int/float-typed backend', async () => {
    await expectDistinct('"limit":1', '"limit":1.0')
  })

  it('a member named __proto__ does not vanish from the key', async () => {
    await expectDistinct('"filter":{"__proto__":{"admin":true}}', '"filter":{}')
  })

  it('members named constructor and prototype are part of the key', async () => {
    await expectDistinct('"filter":{"constructor":1}', '"filter":{"constructor":2}')
    await expectDistinct('"filter":{"prototype":{"a":1}}', '"filter":{}')
  })

  it('duplicate keys deep in params stay apart (first-key-wins and last-key-wins backends)', async () => {
    await expectDistinct('"filter":{"x":{"a":1,"a":2}}', '"filter":{"x":{"a":2}}')
  })

  it('member order is part of the key: parsers may expose it (RFC 8259 §4)', async () => {
    await expectDistinct('"filter":{"a":1,"b":2}', '"filter":{"b":2,"a":1}')
  })

  it('client capabilities split entries, like an HTTP Vary on them', async () => {
    const caps = 'io.modelcontextprotocol/clientCapabilities'
    await expectDistinct('', '', { [caps]: {} }, { [caps]: { elicitation: { form: {} } } })
  })
})

describe('cache keys: what every parser reads the same way shares an entry', () => {
  it('trace context, progress tokens and client info never split entries', async () => {
    await expectShared(
      '',
      '',
      { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      {
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        progressToken: 7,
        'io.modelcontextprotocol/clientInfo': { name: 'other', version: '2' },
      },
    )
  })

  it('strings that differ only in escapes are one value (RFC 8259 §7)', async () => {
    await expectShared('"cursor":"a/é"', '"cursor":"\\u0061\\/\\u00e9"')
  })

  it('whitespace between tokens is not part of the key', async () => {
    await expectShared('"filter":{"a":[1,2]}', '"filter" : { "a" : [ 1 , 2 ] }')
  })
})
