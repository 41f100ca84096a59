import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import type { Page } from 'playwright-core'
import { describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { startDocsServer } from '../../deploy/demo/docs-server.js'
import type { McpHttpServer } from '../../deploy/demo/serve.js'
import { startWeatherServer } from '../../deploy/demo/weather-server.js'
import { definitionDigest, modelView } from '../../src/catalog/definition.js'
import { renderLock, type LockedDefinition } from '../../src/catalog/lock.js'
import { loadConfigFile } from '../../src/runtime/load.js'
import { startGateway } from '../../src/server.js'
import { CHROMIUM, launchChromium, MISSING_CHROMIUM, watchedPage } from '../helpers/browser.js'
import { IN_CI } from '../helpers/cache.js'
import { mcpPost, rawRequest } from '../helpers/clients.js'
import { closing } from '../helpers/lifecycle.js'
import { startSdkServer } from '../helpers/sdk-servers.js'

/**
 * The status page in a real browser (Debian's chromium, driven by playwright-core): every kind of
 * traffic shows on the open page within 3 s without a reload, its figures add up (one cause per
 * request, answers the cache cannot keep apart from misses), nothing a backend or client names
 * runs as markup, and the CSP holds (docs/operations.md §Status page).
 */

/** A tool name that is markup: the page must show it as text. */
const HOSTILE = '<img src=x onerror=alert(1)>'
const TOKEN = 'status-page-token-of-the-test'
/** Within this long of a change, the open page shows it (the event stream sends every 2 s). */
const SEEN_MS = 3000
/** Where the screenshot goes (git-ignored), and MCP_EDGE_STATUS_SCREENSHOT for docs/. */
const OUTPUT = resolve('.vitest/status-page')

const RULES = [
  'rules:',
  '  - name: everyone',
  '    servers: ["*"]',
  '    allow: { tools: ["*"], prompts: ["*"], resources: ["*"] }',
  '  - name: no-deletes',
  '    servers: ["*"]',
]
const LIMITS = [
  'limits:',
  '  - name: alerts-per-client',
  '    servers: [weather]',
  '    tools: [get_alerts]',
  '    key: ip',
  '    rate: 3/minute',
]
const deny = (key = 'deny', limits = true): string =>
  [...RULES, `    ${key}: { tools: ["delete_*"] }`, ...(limits ? LIMITS : []), ''].join('\n')

interface Setup {
  readonly dir: string
  readonly gatewayUrl: string
  readonly adminUrl: string
  /** The docs replica, which the test stops and starts again on the same port. */
  readonly docs: McpHttpServer
  restartDocs(): Promise<void>
  reread(): Promise<void>
}

async function setup(): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-status-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const weather = await closing(startWeatherServer({ port: 0 }))
  let docs = await startDocsServer({ port: 0 })
  onTestFinished(() => docs.close())
  // A third backend lists a tool whose name is markup; the lock has other text for it, so the
  // first list shows it as drifted (and hidden).
  const app = await closing(startSdkServer({ extraTools: [HOSTILE] }))
  const listed = (await mcpPost(app.url, 'tools/list')).response().result as {
    tools: Record<string, unknown>[]
  }
  const tools = new Map<string, LockedDefinition>()
  for (const item of listed.tools) {
    const reviewed = item.name === HOSTILE ? { ...item, description: 'Reviewed text.' } : item
    tools.set(item.name as string, {
      digest: definitionDigest('tools', reviewed),
      definition: modelView('tools', reviewed),
    })
  }
  writeFileSync(
    join(dir, 'catalog.lock.yaml'),
    renderLock({ version: 1, servers: new Map([['app', { tools, prompts: new Map() }]]) }),
  )
  mkdirSync(join(dir, 'policies'))
  writeFileSync(join(dir, 'policies/main.yaml'), deny())
  // loadConfigFile and every reload read ${STATUS_TOKEN} from the environment.
  process.env.STATUS_TOKEN = TOKEN
  const check = { intervalMs: 200, timeoutMs: 500, unhealthyAfter: 1, healthyAfter: 1 }
  writeFileSync(
    join(dir, 'gateway.yaml'),
    stringify({
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0, token: '${STATUS_TOKEN}' },
      log: { level: 'silent' },
      policies: './policies',
      pinning: { lockFile: './catalog.lock.yaml', onDrift: 'hide', newTools: 'allow' },
      cache: {},
      servers: {
        weather: { upstreams: [{ url: weather.url }] },
        docs: { upstreams: [{ url: docs.url }], healthCheck: check },
        app: { upstreams: [{ url: app.url }] },
      },
      virtualServers: { workspace: { members: ['weather', 'docs'] } },
    }),
  )
  const gw = await startGateway(loadConfigFile(join(dir, 'gateway.yaml')))
  onTestFinished(() => gw.close(200))
  return {
    dir,
    gatewayUrl: gw.url,
    adminUrl: `http://127.0.0.1:${gw.adminPort ?? 0}`,
    get docs() {
      return docs
    },
    async restartDocs() {
      docs = await startDocsServer({ port: docs.port })
    },
    reread: () => gw.rereadConfig(),
  }
}

/** The text of the first element `selector` finds, white space folded, or '' when there is none. */
async function text(page: Page, selector: string): Promise<string> {
  const el = page.locator(selector).first()
  const t = (await el.count()) === 0 ? '' : ((await el.textContent()) ?? '')
  return t.replace(/\s+/g, ' ').trim()
}

const call = (url: string, name: string, args: Record<string, unknown> = {}) =>
  mcpPost(url, 'tools/call', { name, arguments: args })

describe.skipIf(CHROMIUM === undefined && !IN_CI)('status page in Chromium', () => {
  it(
    'shows calls, a cache hit, a denial, a 429, a replica out and back, drift and a refused reload live; escapes; CSP holds; needs its token; signs out',
    { timeout: 90_000 },
    async () => {
      if (CHROMIUM === undefined) throw new Error(MISSING_CHROMIUM)
      const s = await setup()
      const weatherUrl = `${s.gatewayUrl}/mcp/weather`

      // With admin.token set, nothing answers without it: the page offers its login form.
      const bare = await rawRequest('GET', `${s.adminUrl}/`)
      expect(bare.status).toBe(401)
      expect(bare.text).toContain('name="token"')
      expect(bare.text).not.toContain('weather')
      for (const path of ['/status.json', '/readyz', '/status/events']) {
        const res = await rawRequest('GET', `${s.adminUrl}${path}`)
        expect(res.status).toBe(401)
        expect(res.text).not.toContain('weather')
      }
      const wrong = await rawRequest('GET', `${s.adminUrl}/status.json`, {
        headers: { authorization: 'Bearer not-the-token-at-all' },
      })
      expect(wrong.status).toBe(401)
      const json = await rawRequest('GET', `${s.adminUrl}/status.json`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      })
      expect(json.status).toBe(200)
      expect(json.headers['content-security-policy']).toContain("default-src 'self'")
      expect(json.headers['x-content-type-options']).toBe('nosniff')

      // The browser signs in through the form and gets the page, live.
      const browser = await launchChromium()
      const { page, trouble } = await watchedPage(browser)
      const first = await page.goto(`${s.adminUrl}/`)
      expect(first?.status()).toBe(401)
      await page.fill('input[name="token"]', TOKEN)
      await Promise.all([page.waitForURL(`${s.adminUrl}/`), page.click('button[type="submit"]')])
      expect(await text(page, 'h1')).toBe('mcp-edge')
      const headers = (await page.reload())?.headers() ?? {}
      expect(headers['content-security-policy']).toContain("frame-ancestors 'none'")
      expect(headers['x-frame-options']).toBe('DENY')
      await expect.poll(() => text(page, '#live'), { timeout: SEEN_MS }).toBe('live')
      // The sign-in page is itself the 401 answer; Chromium logs that, and only that.
      expect(trouble.console).toEqual([expect.stringContaining('status of 401')])
      trouble.console.length = 0
      trouble.navigations = 0 // from here on, every change must arrive without one

      // With nothing configured for them, panels say so rather than show empty tables.
      expect(await text(page, '#servers [data-server="weather"] table.tools + *')).toBe('')
      expect(await text(page, '[data-server="weather"] .tools .empty')).toContain('No tool calls')
      expect(await text(page, 'tr[data-replica="weather#0"] td:last-child')).toContain(
        'no active checks',
      )
      expect(await text(page, 'tr[data-replica="docs#0"] td:last-child')).not.toContain(
        'no active checks',
      )

      // Calls, and a cache hit: the counts move.
      for (let i = 0; i < 3; i++) expect((await mcpPost(weatherUrl, 'tools/list')).status).toBe(200)
      const weatherRequests = '[data-server="weather"] .traffic [data-field="requests"]'
      await expect.poll(() => text(page, weatherRequests), { timeout: SEEN_MS }).toBe('3')
      const row = (server: string, method: string, field: string): string =>
        `#cache tr[data-server="${server}"][data-method="${method}"] [data-field="${field}"]`
      await expect
        .poll(() => text(page, row('weather', 'tools/list', 'hits')), { timeout: SEEN_MS })
        .toBe('2')
      expect(await text(page, row('weather', 'tools/list', 'misses'))).toBe('1')
      // The two hits are answered from the cache, the miss by the backend: 3 requests, all counted.
      const cause = (c: string) =>
        `[data-server="weather"] .traffic tbody tr:first-child [data-cause="${c}"]`
      expect(await text(page, cause('cache'))).toBe('2')
      expect(await text(page, cause('ok'))).toBe('1')

      // A backend that marks its lists ttlMs 0: not cacheable, with the reason, never a miss.
      const docsUrl = `${s.gatewayUrl}/mcp/docs`
      for (let i = 0; i < 3; i++) expect((await mcpPost(docsUrl, 'tools/list')).status).toBe(200)
      await expect
        .poll(() => text(page, row('docs', 'tools/list', 'not-cacheable')), { timeout: SEEN_MS })
        .toBe('3')
      expect(await text(page, row('docs', 'tools/list', 'misses'))).toBe('0')
      expect(await text(page, row('docs', 'tools/list', 'why-not'))).toBe('no ttlMs (or 0) 3')

      // The hit ratio chart draws the lone interval that had hits as a visible point, its value
      // on hover (the next sample of the ring comes within 5 s).
      const hitPoint = '#charts figure:nth-of-type(2) circle.point.single'
      await expect
        .poll(() => page.locator(hitPoint).count(), { timeout: SEEN_MS + 5000 })
        .toBeGreaterThan(0)
      expect(await text(page, `${hitPoint} title`)).toMatch(/^weather: 67% at \d\d:\d\d:\d\d UTC$/)

      // A denied call: a row naming the rule.
      const denied = await call(weatherUrl, 'delete_station', { id: 'oslo' })
      expect(denied.response().error).toBeDefined()
      await expect.poll(() => text(page, '.denials .rule'), { timeout: SEEN_MS }).toBe('no-deletes')
      expect(await text(page, '.denials .target')).toContain('delete_station')
      // A client-chosen name that is markup, denied: shown as text.
      await call(weatherUrl, `delete_${HOSTILE}`)
      await expect
        .poll(() => text(page, '.denials .target code'), { timeout: SEEN_MS })
        .toBe(`delete_${HOSTILE}`)

      // A caller over its limit: a 429 count.
      const statuses: number[] = []
      for (let i = 0; i < 5; i++)
        statuses.push((await call(weatherUrl, 'get_alerts', { region: 'north' })).status)
      expect(statuses.filter((st) => st === 429).length).toBeGreaterThanOrEqual(2)
      const refused = '#rate-limits tr[data-limit="alerts-per-client"] [data-field="refused"]'
      await expect
        .poll(async () => Number(await text(page, refused)), { timeout: SEEN_MS })
        .toBeGreaterThanOrEqual(2)
      // Per tool: the five calls, the refused ones among its errors; the denied call its own row.
      const tool = (name: string, field: string): string =>
        `#servers [data-server="weather"] tr[data-tool="${name}"] [data-field="${field}"]`
      await expect
        .poll(() => text(page, tool('get_alerts', 'calls')), { timeout: SEEN_MS })
        .toBe('5')
      expect(Number(await text(page, tool('get_alerts', 'errors')))).toBeGreaterThanOrEqual(2)
      expect(
        Number(
          await text(
            page,
            '[data-server="weather"] .traffic tr:first-child [data-cause="limited"]',
          ),
        ),
      ).toBeGreaterThanOrEqual(2)

      // A virtual server's tools, by the names its merged list gives them.
      const workspaceUrl = `${s.gatewayUrl}/mcp/workspace`
      expect((await mcpPost(workspaceUrl, 'tools/list')).status).toBe(200)
      expect((await call(workspaceUrl, 'search_docs', { query: 'cache' })).status).toBe(200)
      const searches =
        '#virtual-servers [data-server="workspace"] tr[data-tool="search_docs"] [data-field="calls"]'
      await expect.poll(() => text(page, searches), { timeout: SEEN_MS }).toBe('1')

      // The configuration as it runs: health checks, rules with their hits, limits, virtual servers.
      const config = '#configuration'
      expect(await text(page, `${config} [data-server="docs"] [data-field="health-check"]`)).toBe(
        'every 200 ms, timeout 500 ms; down after 1 failure, up after 1 success',
      )
      expect(
        await text(page, `${config} [data-server="weather"] [data-field="health-check"]`),
      ).toContain('none')
      expect(
        Number(await text(page, `${config} tr[data-rule="no-deletes"] [data-field="hits"]`)),
      ).toBe(2)
      expect(
        Number(await text(page, `${config} tr[data-rule="everyone"] [data-field="hits"]`)),
      ).toBeGreaterThanOrEqual(5)
      expect(
        Number(
          await text(page, `${config} tr[data-limit="alerts-per-client"] [data-field="refused"]`),
        ),
      ).toBeGreaterThanOrEqual(2)
      expect(await text(page, `${config} .config-virtual tr[data-server="workspace"]`)).toContain(
        'weather, docs',
      )

      // A replica killed: its state changes; back when it returns.
      const docsState = () =>
        page.locator('tr[data-replica="docs#0"]').first().getAttribute('data-state')
      expect(await docsState()).toBe('healthy')
      const port = s.docs.port
      await s.docs.close()
      await expect.poll(docsState, { timeout: SEEN_MS + 1000 }).toBe('unhealthy')
      await s.restartDocs()
      expect(s.docs.port).toBe(port)
      await expect.poll(docsState, { timeout: SEEN_MS + 1000 }).toBe('healthy')

      // A drifted definition (whose name is markup): listed by name, as text.
      const appTools = await mcpPost(`${s.gatewayUrl}/mcp/app`, 'tools/list')
      const names = (appTools.response().result as { tools: { name: string }[] }).tools
      expect(names.map((t) => t.name)).not.toContain(HOSTILE)
      const drifted = '[data-server="app"] details[data-kind="tools"][data-set="drifted"] code'
      await expect.poll(() => text(page, drifted), { timeout: SEEN_MS }).toBe(HOSTILE)

      // A refused reload: the misspelt key, on the page.
      writeFileSync(join(s.dir, 'policies/main.yaml'), deny('dny'))
      await s.reread() // as SIGHUP does
      const reload = '#gateway [data-field="reload"]'
      await expect
        .poll(() => text(page, `${reload} [data-outcome]`), { timeout: SEEN_MS })
        .toBe('refused')
      expect(await text(page, reload)).toContain('rules[1].dny: unknown key (did you mean deny?)')

      // The edit undone: nothing reloads (disk and running config agree), and the page says so.
      writeFileSync(join(s.dir, 'policies/main.yaml'), deny())
      await s.reread()
      await expect
        .poll(() => text(page, `${reload} [data-outcome]`), { timeout: SEEN_MS })
        .toBe('resolved')
      expect(await text(page, reload)).toContain('match the running config again')

      // Nothing ran: no element from the markup names, no dialog, no CSP violation, no error.
      expect(await page.locator('main img').count()).toBe(0)
      expect(trouble).toEqual({ console: [], csp: [], errors: [], dialogs: [], navigations: 0 })

      mkdirSync(OUTPUT, { recursive: true })
      const shot = join(OUTPUT, 'status-page.png')
      await page.screenshot({ path: shot, fullPage: true })
      const docsCopy = process.env.MCP_EDGE_STATUS_SCREENSHOT
      if (docsCopy !== undefined) {
        mkdirSync(dirname(resolve(docsCopy)), { recursive: true })
        copyFileSync(shot, resolve(docsCopy))
      }

      // The limits removed: the reload applies, and the empty panel says why it is empty.
      writeFileSync(join(s.dir, 'policies/main.yaml'), deny('deny', false))
      await s.reread()
      await expect
        .poll(() => text(page, `${reload} [data-outcome]`), { timeout: SEEN_MS })
        .toBe('applied')
      await expect
        .poll(() => text(page, '#rate-limits .empty'), { timeout: SEEN_MS })
        .toContain('No limits are configured: the policy files have no limits:')
      expect(trouble).toEqual({ console: [], csp: [], errors: [], dialogs: [], navigations: 0 })

      // The sign-in was a session cookie no script can read; signing out ends it on the gateway.
      const [session, ...others] = await page.context().cookies()
      expect(others).toEqual([])
      expect(session).toMatchObject({
        name: 'mcp_edge_admin',
        path: '/',
        httpOnly: true,
        sameSite: 'Strict',
        secure: false,
      })
      expect(session?.value).not.toContain(TOKEN)
      await Promise.all([page.waitForURL(`${s.adminUrl}/`), page.click('form.sign-out button')])
      expect(await page.locator('input[name="token"]').count()).toBe(1)
      expect(await page.context().cookies()).toEqual([])
      const stale = await rawRequest('GET', `${s.adminUrl}/status.json`, {
        headers: { cookie: `mcp_edge_admin=${session?.value ?? ''}` },
      })
      expect(stale.status).toBe(401)
      expect(stale.text).toBe('{"error":"unauthorized"}\n')
    },
  )
})
