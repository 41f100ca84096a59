import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/client'
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio'
import { decodeJwt } from 'jose'
import { describe, expect, it, onTestFinished } from 'vitest'
import { gatewayTrusting, startAuthorizationServer } from '../helpers/authorization-server.js'
import { closing, textOf } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * mcp-remote, the stdio bridge desktop clients use for remote servers, signs in through the
 * gateway: it finds the AS from the gateway's 401 and RFC 9728 metadata, registers, starts the
 * browser flow with its own callback server, and proxies MCP. Its "browser" here does nothing
 * (BROWSER=true); the test plays the user: it reads the authorization URL mcp-remote prints,
 * signs in at the AS, and delivers the callback with its own HTTP request.
 */

const PROXY = fileURLToPath(import.meta.resolve('mcp-remote/dist/proxy.js'))

/** A loopback port nobody listens on right now (mcp-remote needs a number, not 0). */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** Resolves with the first `https?://…` URL printed after `marker` on `stream`. */
function urlAfter(stream: Readable, marker: string, log: string[]): Promise<URL> {
  return new Promise((resolve, reject) => {
    let text = ''
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8')
      log.push(chunk.toString('utf8'))
      const at = text.indexOf(marker)
      const found = at === -1 ? null : /https?:\/\/\S+/.exec(text.slice(at + marker.length))
      if (found !== null) resolve(new URL(found[0]))
    })
    stream.on('end', () => reject(new Error(`mcp-remote ended before printing a URL:\n${text}`)))
  })
}

describe('mcp-remote signs in through the gateway', () => {
  it.each(['legacy', 'auto'] as const)(
    '--protocol %s: browser flow, callback, tools listed and called over stdio',
    async (protocol) => {
      // mcp-remote refreshes a token that has less than a minute left: give it ten.
      const as = await closing(startAuthorizationServer({ accessTokenTtlSec: 600 }))
      const backend = await closing(startSdkServer())
      const gw = await gatewayTrusting(as, { weather: backend })
      const url = gw.mcpUrl('weather')
      const home = await mkdtemp(join(tmpdir(), 'mcp-remote-'))
      onTestFinished(() => rm(home, { recursive: true, force: true }))
      const port = await freePort()
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [PROXY, url, String(port), '--host', '127.0.0.1', '--protocol', protocol],
        // Tokens and registrations go to the temp dir; the "browser" is `true`, which opens
        // nothing (xdg-open, and mcp-remote's fallbacks, honour $BROWSER).
        env: {
          PATH: process.env['PATH'] ?? '',
          HOME: home,
          MCP_REMOTE_CONFIG_DIR: home,
          BROWSER: 'true',
        },
        stderr: 'pipe',
      })
      const stderr: string[] = []
      const authorizationUrl = urlAfter(
        transport.stderr as Readable,
        'Please authorize this client by visiting:',
        stderr,
      )
      const client = new Client({ name: 'desktop-app', version: '1.0.0' })
      onTestFinished(async () => {
        await client.close()
        await transport.close() // the child, even when connect never finished
      })
      const connected = client.connect(transport)

      const authorization = await authorizationUrl
      expect(authorization.origin + authorization.pathname).toBe(`${as.issuer}/auth`)
      expect(authorization.searchParams.get('resource')).toBe(url)
      expect(authorization.searchParams.get('code_challenge_method')).toBe('S256')
      const callback = await as.signIn(authorization)
      expect(callback.origin).toBe(`http://127.0.0.1:${port}`)
      // The user's browser lands on mcp-remote's callback server.
      const landed = await fetch(callback)
      expect(landed.status).toBe(200)
      await landed.arrayBuffer()
      await connected

      const tools = await client.listTools()
      expect(tools.tools.map((t) => t.name)).toContain('get_forecast')
      const result = await client.callTool({ name: 'get_forecast', arguments: { city: 'Lima' } })
      expect(textOf(result)).toContain('Lima')
      const calls = backend.calls('tools/call')
      expect(calls).toHaveLength(1)
      // The era mcp-remote spoke through the gateway.
      expect(calls[0]?.header('mcp-protocol-version')).toBe(
        protocol === 'auto' ? '2026-07-28' : '2025-11-25',
      )
      expect(as.signIns).toBe(1)
      expect(as.grants).toEqual(['authorization_code'])
      expect(as.errors).toEqual([])

      // What mcp-remote stored is a token the AS issued for this server.
      const files = await readdir(home, { recursive: true })
      const tokensFile = files.find((f) => f.endsWith('_tokens.json'))
      expect(tokensFile, stderr.join('')).toBeDefined()
      const stored = JSON.parse(await readFile(join(home, tokensFile!), 'utf8')) as {
        access_token: string
      }
      expect(decodeJwt(stored.access_token)).toMatchObject({ iss: as.issuer, aud: url })
    },
  )
})
