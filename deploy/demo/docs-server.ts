import {
  McpServer,
  ResourceTemplate,
  completable,
  createMcpHandler,
  type CreateMcpHandlerOptions,
  type McpHttpHandler,
  type RegisteredTool,
} from '@modelcontextprotocol/server'
import * as z from 'zod'
import {
  serveMcpHandler,
  type CacheHints,
  type ListenOptions,
  type McpHttpServer,
} from './serve.js'

/** The pages behind the docs://pages/{name} template. */
const DOC_PAGES: Readonly<Record<string, string>> = {
  install: 'Install mcp-edge with npm and point it at a gateway.json.',
  routing: 'Routes map a path to a pool of upstream MCP servers.',
  policies: 'Policies allow or deny tools, prompts and resources per principal.',
  caching: 'List results are cached as long as the upstream ttlMs allows.',
}

const TOPICS = ['caching', 'policies', 'routing', 'security', 'sessions'] as const

const startsWith = (prefix: string) => (value: string) => value.startsWith(prefix)

/** Registers docs://readme, docs://changelog and the docs://pages/{name} template. */
export function registerDocsResources(server: McpServer): void {
  server.registerResource(
    'readme',
    'docs://readme',
    {
      mimeType: 'text/markdown',
      description: 'What the demo docs server is',
      cacheHint: { ttlMs: 30_000, cacheScope: 'public' },
    },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/markdown', text: '# demo-docs\n' }] }),
  )
  server.registerResource(
    'changelog',
    'docs://changelog',
    { mimeType: 'text/markdown', description: 'Release notes' },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/markdown', text: '## 1.0.0\n' }] }),
  )
  const pages = new ResourceTemplate('docs://pages/{name}', {
    list: () => ({
      resources: Object.keys(DOC_PAGES).map((name) => ({
        uri: `docs://pages/${name}`,
        name,
        mimeType: 'text/plain',
      })),
    }),
    complete: { name: (value) => Object.keys(DOC_PAGES).filter(startsWith(value)) },
  })
  server.registerResource('page', pages, { mimeType: 'text/plain' }, (uri, { name }) => {
    const key = String(name)
    return {
      contents: [
        { uri: uri.href, mimeType: 'text/plain', text: DOC_PAGES[key] ?? `(no page ${key})` },
      ],
    }
  })
}

/** Registers the prompts summarize {topic (completable)} and review {page}. */
export function registerDocsPrompts(server: McpServer): void {
  server.registerPrompt(
    'summarize',
    {
      description: 'Summarize the docs on a topic',
      argsSchema: z.object({ topic: completable(z.string(), (v) => TOPICS.filter(startsWith(v))) }),
    },
    ({ topic }) => ({
      messages: [
        { role: 'user', content: { type: 'text', text: `Summarize the docs on ${topic}.` } },
      ],
    }),
  )
  server.registerPrompt(
    'review',
    { description: 'Review a docs page', argsSchema: z.object({ page: z.string() }) },
    ({ page }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Review docs://pages/${page}.` } }],
    }),
  )
}

/** Registers the search_docs tool. */
function registerDocsTools(server: McpServer): Record<string, RegisteredTool> {
  const search = server.registerTool(
    'search_docs',
    {
      description: 'Full-text search over the docs pages',
      inputSchema: z.object({ query: z.string() }),
      annotations: { readOnlyHint: true },
    },
    ({ query }) => {
      const q = query.toLowerCase()
      const hits = Object.entries(DOC_PAGES).filter(([, body]) => body.toLowerCase().includes(q))
      const lines = hits.map(([name]) => `docs://pages/${name}`)
      return {
        content: [{ type: 'text', text: lines.length > 0 ? lines.join('\n') : 'no matches' }],
      }
    },
  )
  return { search_docs: search }
}

/** Cache hints of the docs server: its lists are the same for everyone. */
const DOCS_CACHE_HINTS: CacheHints = {
  'resources/list': { ttlMs: 30_000, cacheScope: 'public' },
  'resources/templates/list': { ttlMs: 30_000, cacheScope: 'public' },
  'prompts/list': { ttlMs: 30_000, cacheScope: 'public' },
}

/** The MCP handler of the demo-docs server (2025-era clients are served statelessly by default). */
function createDocsHandler(options: CreateMcpHandlerOptions = {}): McpHttpHandler {
  return createMcpHandler(() => {
    const server = new McpServer(
      { name: 'demo-docs', version: '1.0.0' },
      { cacheHints: DOCS_CACHE_HINTS },
    )
    registerDocsResources(server)
    registerDocsPrompts(server)
    registerDocsTools(server)
    return server
  }, options)
}

/** Starts demo-docs on node:http; port 0 picks a free port. */
export function startDocsServer(options: ListenOptions = {}): Promise<McpHttpServer> {
  return serveMcpHandler(createDocsHandler(), options)
}
