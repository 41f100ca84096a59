/**
 * `npm start`: starts the bundled demo MCP servers (official SDK) and the gateway in front of them
 * with deploy/gateway.demo.yaml. Ctrl-C (SIGINT) or SIGTERM drains and stops everything. README
 * "Things to try" walks through what it shows.
 */
import { fileURLToPath } from 'node:url'
import { problemsText } from '../../src/cli/problems.js'
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
      process.stderr.write(problemsText(configFile, err))
      process.exit(1)
    }
    throw err
  }
  const demo = await startDemoServers()
  const gw = await startGateway(loaded)
  const admin =
    gw.adminPort === undefined
      ? ''
      : `  http://${adminHost(loaded.config.admin?.host)}:${gw.adminPort}/  status page (also /status.json, /readyz, /metrics)\n`
  process.stderr.write(
    `\nmcp-edge demo is up:\n` +
      `  ${gw.url}/mcp/weather    demo-weather, two replicas: ${demo.weather.url}, ${demo.weather2.url}\n` +
      `  ${gw.url}/mcp/docs       demo-docs at ${demo.docs.url}\n` +
      `  ${gw.url}/mcp/ci         demo-ci at ${demo.ci.url} (serves events and skills)\n` +
      `  ${gw.url}/mcp/workspace  virtual server: weather + docs\n` +
      admin +
      'Things to try (follow events, read a skill, trip a limit, hide a tool, watch a drift,\n' +
      '  stop a replica):\n' +
      '  README.md "Things to try". Press Ctrl-C to stop.\n\n',
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
