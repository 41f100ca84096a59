import type { ServerNotifier } from '@modelcontextprotocol/server'
import { startCiServer } from './ci-server.js'
import type { CatalogState } from './control.js'
import { startDocsServer } from './docs-server.js'
import type { McpHttpServer } from './serve.js'
import { startWeatherServer } from './weather-server.js'

/** Ports and host of the demo servers. */
export interface DemoServersOptions {
  readonly weatherPort?: number
  /** demo-weather's second replica. */
  readonly weather2Port?: number
  readonly docsPort?: number
  readonly ciPort?: number
  readonly host?: string
}

/** Every demo server on a port the OS picks (tests, benches): none of the demo's fixed ports. */
export const ANY_PORTS: DemoServersOptions = {
  weatherPort: 0,
  weather2Port: 0,
  docsPort: 0,
  ciPort: 0,
}

/** The demo upstreams; `notify` fires list_changed or resource updates on their listen streams. */
export interface DemoServers {
  readonly weather: McpHttpServer
  readonly weather2: McpHttpServer
  readonly docs: McpHttpServer
  readonly ci: McpHttpServer
  readonly notify: { readonly weather: ServerNotifier; readonly docs: ServerNotifier }
  close(): Promise<void>
}

/**
 * Starts demo-weather (two replicas, what their tools say shared: deploy/demo/control.ts),
 * demo-docs and demo-ci (defaults: 127.0.0.1:9101 and :9104, :9102, :9103).
 */
export async function startDemoServers({
  weatherPort = 9101,
  weather2Port = 9104,
  docsPort = 9102,
  ciPort = 9103,
  host = '127.0.0.1',
}: DemoServersOptions = {}): Promise<DemoServers> {
  const catalog: CatalogState = { drifted: false }
  const started: McpHttpServer[] = []
  const start = async (s: Promise<McpHttpServer>): Promise<McpHttpServer> => {
    const server = await s
    started.push(server)
    return server
  }
  try {
    const weather = await start(startWeatherServer({ port: weatherPort, host, catalog }))
    const weather2 = await start(startWeatherServer({ port: weather2Port, host, catalog }))
    const docs = await start(startDocsServer({ port: docsPort, host }))
    const ci = await start(startCiServer({ port: ciPort, host }))
    return {
      weather,
      weather2,
      docs,
      ci,
      notify: { weather: weather.handler.notify, docs: docs.handler.notify },
      async close() {
        await Promise.all(started.map((s) => s.close()))
      },
    }
  } catch (error) {
    // don't leak the servers already up when a later port is taken
    await Promise.all(started.map((s) => s.close()))
    throw error
  }
}
