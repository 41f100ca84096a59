import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { parseConfigText } from '../../src/runtime/load.js'
import { mcpPost } from '../helpers/clients.js'
import { oneServer, startTestGateway } from '../helpers/gateway.js'
import { startNonValidatingBackend } from '../helpers/sdk-servers.js'
import { generateTestKey, startJwks } from '../helpers/tokens.js'

/**
 * The pipeline only holds the stages its config uses (app.ts). A reload that turns on
 * authentication must put the stage in front of the very next request: no window where the new
 * config is in force but its checks are not.
 */
describe('a reload rebuilds the pipeline', () => {
  it('enforces authentication from the first request after auth is turned on', async () => {
    const backend = await startNonValidatingBackend()
    onTestFinished(() => backend.close())
    const key = await generateTestKey('ES256')
    const jwks = await startJwks([key])
    onTestFinished(() => jwks.close())
    const base = oneServer(backend.url)
    const gw = await startTestGateway(base, { autoClose: true })
    expect((await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'echo' })).status).toBe(200)
    const withAuth = {
      listen: { host: '127.0.0.1', port: 0 },
      ...base,
      auth: {
        publicUrl: 'https://mcp.example.test',
        jwt: { issuer: 'https://idp.example.test', jwksUrl: jwks.url },
      },
    }
    await gw.reload(parseConfigText(stringify(withAuth), { dir: process.cwd() }))
    const res = await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'echo' })
    expect(res.status).toBe(401)
    expect(backend.requests).toHaveLength(1)
    // And back: without auth the stage is gone again.
    await gw.reload(
      parseConfigText(stringify({ listen: { host: '127.0.0.1', port: 0 }, ...base }), {
        dir: process.cwd(),
      }),
    )
    expect((await mcpPost(gw.mcpUrl('app'), 'tools/call', { name: 'echo' })).status).toBe(200)
  })
})
