/**
 * `npm start`: starts the two bundled demo MCP servers (official SDK) and the gateway in front of
 * them with deploy/gateway.demo.yaml. Ctrl-C (SIGINT) or SIGTERM drains and stops everything.
 */
import { fileURLToPath } from 'node:url'
import { ConfigError, loadConfigFile } from '../../src/runtime/load.js'
import { startGateway } from '../../src/server.js'
import { startDemoServers } from './servers.js'

const configFile =
  process.env.MCP_EDGE_CONFIG ?? fileURLToPath(new URL('../gateway.demo.yaml', import.meta.url))

async function main(): Promise<void> {
  let loaded
  try {
    loaded = loadConfigFile(configFile)
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${configFile}: ${err.problems.join('\n  ')}\n`)
      process.exit(1)
    }
    throw err
  }
  const demo = await startDemoServers()
  const gw = await startGateway(loaded)
  process.stderr.write(
    `\nmcp-edge demo is up:\n  ${gw.url}/mcp/weather  (demo-weather at ${demo.weather.url})\n` +
      `  ${gw.url}/mcp/docs     (demo-docs at ${demo.docs.url})\n` +
      `  ${gw.url}/mcp/workspace (virtual server: weather + docs)\n` +
      (gw.adminPort === undefined
        ? ''
        : `  http://${adminHost(loaded.config.admin?.host)}:${gw.adminPort}/ (status page; also /status.json, /readyz, /metrics)\n`) +
      'Press Ctrl-C to stop.\n\n',
  )
  let stopping = false
  const stop = (): void => {
    if (stopping) return
    stopping = true
    void gw
      .close(2000)
      .then(() => demo.close())
      .then(() => process.exit(0))
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

/** The admin host as a browser would type it (an IPv6 address in brackets). */
function adminHost(host: string | undefined): string {
  if (host === undefined || host === '0.0.0.0' || host === '::') return '127.0.0.1'
  return host.includes(':') ? `[${host}]` : host
}

void main()
