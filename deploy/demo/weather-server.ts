import {
  McpServer,
  acceptedContent,
  createMcpHandler,
  inputRequired,
  inputResponse,
  type CallToolResult,
  type CreateMcpHandlerOptions,
  type McpHttpHandler,
  type RegisteredTool,
  type ServerContext,
} from '@modelcontextprotocol/server'
import * as z from 'zod'
import { controlRoutes, FORECAST_TEXT, type CatalogState } from './control.js'
import {
  serveMcpHandler,
  type CacheHints,
  type ListenOptions,
  type McpHttpServer,
} from './serve.js'

/** Hooks for the weather tools: tests pass `onAbort`, the demo `catalog`. */
export interface WeatherHooks {
  /** Called when a long-running tool stops early because its request was aborted. */
  readonly onAbort?: (tool: string) => void
  /** What get_forecast says: the pinned text unless the demo made it drift (control.ts). */
  readonly catalog?: CatalogState | undefined
}

/** Milliseconds between two progress notifications of `slow_forecast`. */
const PROGRESS_INTERVAL_MS = 150

const CONDITIONS = ['sunny', 'cloudy', 'rainy', 'windy', 'foggy', 'snowy'] as const

const confirmSchema = z.object({ confirm: z.boolean().describe('Go ahead?') })

/** A deterministic fake forecast: the same city always gets the same weather. */
export function forecastFor(city: string): string {
  let h = 7
  for (const ch of city.toLowerCase()) h = (h * 31 + ch.charCodeAt(0)) >>> 0
  const condition = CONDITIONS[h % CONDITIONS.length] ?? 'sunny'
  return `Forecast for ${city}: ${condition}, ${(h % 35) - 5}°C`
}

const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] })

/** Registers get_forecast, get_alerts, slow_forecast, confirm_action and delete_station. */
export function registerWeatherTools(
  server: McpServer,
  hooks: WeatherHooks = {},
): Record<string, RegisteredTool> {
  const tools: Record<string, RegisteredTool> = {}
  tools['get_forecast'] = server.registerTool(
    'get_forecast',
    {
      description: hooks.catalog?.drifted === true ? FORECAST_TEXT.drifted : FORECAST_TEXT.pinned,
      inputSchema: z.object({ city: z.string() }),
      annotations: { readOnlyHint: true },
    },
    ({ city }) => text(forecastFor(city)),
  )
  tools['get_alerts'] = server.registerTool(
    'get_alerts',
    {
      description: 'Active weather alerts for a region',
      // SEP-2243: the client mirrors this argument into the Mcp-Param-Region header
      inputSchema: z.object({ region: z.string().meta({ 'x-mcp-header': 'Region' }) }),
      annotations: { readOnlyHint: true },
    },
    ({ region }) => text(`No active alerts for ${region}`),
  )
  tools['slow_forecast'] = server.registerTool(
    'slow_forecast',
    {
      description: `Forecast that takes steps × ${PROGRESS_INTERVAL_MS} ms and reports progress`,
      inputSchema: z.object({
        city: z.string(),
        steps: z.number().int().min(1).max(200).default(3),
      }),
      annotations: { readOnlyHint: true },
    },
    async ({ city, steps }, ctx) => {
      const finished = await runSteps(steps, ctx)
      if (!finished) {
        hooks.onAbort?.('slow_forecast')
        return { ...text(`slow_forecast for ${city} aborted`), isError: true }
      }
      return text(forecastFor(city))
    },
  )
  tools['confirm_action'] = server.registerTool(
    'confirm_action',
    {
      description: 'Asks the user to confirm an action (multi-round-trip elicitation)',
      inputSchema: z.object({ action: z.string() }),
    },
    ({ action }, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'confirm')
      if (answer.kind === 'missing') {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({
              message: `Really ${action}?`,
              requestedSchema: confirmSchema,
            }),
          },
          requestState: `confirm:${action}`,
        })
      }
      const content = acceptedContent(ctx.mcpReq.inputResponses, 'confirm', confirmSchema)
      return text(content?.confirm === true ? `confirmed: ${action}` : 'cancelled')
    },
  )
  tools['delete_station'] = server.registerTool(
    'delete_station',
    {
      description: 'Deletes a weather station (destructive; policies usually deny it)',
      inputSchema: z.object({ id: z.string() }),
      annotations: { destructiveHint: true, readOnlyHint: false },
    },
    ({ id }) => text(`deleted station ${id}`),
  )
  return tools
}

/** Sleeps `steps` intervals, reporting progress when asked to; false when aborted first. */
async function runSteps(steps: number, ctx: ServerContext): Promise<boolean> {
  const { signal } = ctx.mcpReq
  const token = ctx.mcpReq._meta?.progressToken
  for (let step = 1; step <= steps; step++) {
    if (!(await sleep(PROGRESS_INTERVAL_MS, signal))) return false
    // progress only when the client asked for it: that is what upgrades the response to SSE
    if (token !== undefined) {
      await ctx.mcpReq.notify({
        method: 'notifications/progress',
        params: { progressToken: token, progress: step, total: steps, message: `step ${step}` },
      })
    }
  }
  return true
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false)
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve(true)
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** Cache hints of the weather server: its tool list is the same for everyone. */
const WEATHER_CACHE_HINTS: CacheHints = {
  'tools/list': { ttlMs: 60_000, cacheScope: 'public' },
  'server/discover': { ttlMs: 60_000, cacheScope: 'public' },
}

/** The MCP handler of demo-weather (2025-era clients are served statelessly by default). */
function createWeatherHandler(
  hooks: WeatherHooks,
  options: CreateMcpHandlerOptions = {},
): McpHttpHandler {
  return createMcpHandler(() => {
    const server = new McpServer(
      { name: 'demo-weather', version: '1.0.0' },
      { cacheHints: WEATHER_CACHE_HINTS },
    )
    registerWeatherTools(server, hooks)
    return server
  }, options)
}

/**
 * Starts demo-weather on node:http; port 0 picks a free port. With `catalog` (shared by the
 * demo's replicas), `POST /demo/drift` and `/demo/restore` change what get_forecast says; every
 * replica takes `POST /demo/stop` (control.ts).
 */
export async function startWeatherServer(
  options: ListenOptions & { readonly catalog?: CatalogState } = {},
): Promise<McpHttpServer> {
  const catalog = options.catalog
  const handler = createWeatherHandler({ catalog })
  // The routes read it when a request comes, after it is assigned.
  const routes = controlRoutes({
    server: () => server,
    catalog: catalog && { state: catalog, changed: () => handler.notify.toolsChanged() },
  })
  const server: McpHttpServer = await serveMcpHandler(handler, options, routes)
  return server
}
