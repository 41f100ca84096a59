import { McpServer, createMcpHandler } from '@modelcontextprotocol/server'
import * as z from 'zod'
import { nodeServing } from '../../deploy/demo/serve.js'
import { startRecording, type TestServer } from './sdk-servers.js'

/** The HTML an app is served as (SEP-1865 §UI Resource Format). */
export const APP_MIME_TYPE = 'text/html;profile=mcp-app'

export interface AppsServerOptions {
  /** serverInfo.name, also written into the app's HTML and every tool result. */
  readonly name: string
  /** The app's resource (default `ui://dashboard`). */
  readonly resourceUri?: string
}

/**
 * Starts a 2026-07-28 server (2025-era requests served statelessly) with the official SDK that is
 * an MCP App as SEP-1865 (spec 2026-01-26) describes one: `show_dashboard` points at a
 * `ui://` resource through `_meta.ui.resourceUri` (and is visible to model and app), the
 * resource is HTML of `text/html;profile=mcp-app`, and `refresh_dashboard` is a tool only the
 * app may call (`visibility: ["app"]`). Every tool answers with the server's name.
 */
export async function startAppsServer(options: AppsServerOptions): Promise<TestServer> {
  const { name } = options
  const uri = options.resourceUri ?? 'ui://dashboard'
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name, version: '1.0.0' })
      server.registerResource(
        'dashboard',
        uri,
        { title: `${name} dashboard`, mimeType: APP_MIME_TYPE },
        () => ({
          contents: [
            {
              uri,
              mimeType: APP_MIME_TYPE,
              text: `<!doctype html><html><body data-server="${name}"><script>/* calls refresh_dashboard */</script></body></html>`,
              _meta: { ui: { prefersBorder: true } },
            },
          ],
        }),
      )
      const answer = (tool: string) => () => ({
        content: [{ type: 'text' as const, text: `${name}:${tool}` }],
      })
      server.registerTool(
        'show_dashboard',
        {
          description: 'Shows the dashboard',
          inputSchema: z.object({ city: z.string().optional() }),
          _meta: { ui: { resourceUri: uri, visibility: ['model', 'app'] } },
        },
        answer('show_dashboard'),
      )
      server.registerTool(
        'refresh_dashboard',
        {
          description: 'Refreshes the dashboard (app only)',
          _meta: { ui: { resourceUri: uri, visibility: ['app'] } },
        },
        answer('refresh_dashboard'),
      )
      server.registerTool('plain_tool', { description: 'No app' }, answer('plain_tool'))
      return server
    },
    { legacy: 'stateless' },
  )
  const node = nodeServing(handler)
  const http = await startRecording(async (req, res, rec) => {
    await node(req, res, rec.body)
  })
  return {
    ...http,
    notify: handler.notify,
    async close() {
      await handler.close()
      await http.close()
    },
  }
}
