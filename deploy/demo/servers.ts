import type { ServerNotifier } from '@modelcontextprotocol/server'
import { startDocsServer } from './docs-server.js'
import type { McpHttpServer } from './serve.js'
import { startWeatherServer } from './weather-server.js'

/** Ports and host of the two demo servers. */
export interface DemoServersOptions {
  readonly weatherPort?: number
  readonly docsPort?: number
  readonly host?: string
}

/** Both demo upstreams; `notify` fires list_changed or resource updates on their listen streams. */
export interface DemoServers {
  readonly weather: McpHttpServer
  readonly docs: McpHttpServer
  readonly notify: { readonly weather: ServerNotifier; readonly docs: ServerNotifier }
  close(): Promise<void>
}

/** Starts demo-weather and demo-docs (defaults: 127.0.0.1:9101 and :9102). */
export async function startDemoServers({
  weatherPort = 9101,
  docsPort = 9102,
  host = '127.0.0.1',
}: DemoServersOptions = {}): Promise<DemoServers> {
  const weather = await startWeatherServer({ port: weatherPort, host })
  let docs: McpHttpServer
  try {
    docs = await startDocsServer({ port: docsPort, host })
  } catch (error) {
    await weather.close() // don't leak the first server when the second port is taken
    throw error
  }
  return {
    weather,
    docs,
    notify: { weather: weather.handler.notify, docs: docs.handler.notify },
    async close() {
      await Promise.all([weather.close(), docs.close()])
    },
  }
}
