import { McpServer, createMcpHandler } from '@modelcontextprotocol/server'
import {
  SkillsExtension,
  memorySkillFiles,
  type SkillCatalog,
  type SkillSource,
} from '@modelcontextprotocol/server/ext/skills'
import { nodeServing } from '../../deploy/demo/serve.js'
import { startRecording, type TestServer } from './sdk-servers.js'

/** A SKILL.md with the frontmatter the Agent Skills format requires (name, description). */
export function skillMd(name: string, description: string, body = `# ${name}\n`): string {
  return `---\nname: ${name}\ndescription: ${description}\n---\n\n${body}`
}

/** Two skills, one with supporting files in a subdirectory. */
const DEFAULT_SKILLS: Readonly<Record<string, string>> = {
  'refunds/SKILL.md': skillMd('refunds', 'Process refund requests per policy'),
  'refunds/examples/email.md': 'Dear customer, your refund is on its way.\n',
  'refunds/templates/note.md': 'Refund note\n',
  'secrets/SKILL.md': skillMd('secrets', 'Rotate production credentials'),
  'secrets/run.sh': 'echo rotate\n',
}

export interface SkillsServerOptions {
  readonly name?: string
  /** The skill files by path under the catalog (`refunds/SKILL.md`); read live on `reload()`. */
  readonly files?: Readonly<Record<string, string>>
  /** Serves `skill://<prefix>/…` (the catalog's organisational prefix). */
  readonly prefix?: string
  /** skills/list and directory pages of this size (default: the SDK's 100). */
  readonly pageSize?: number
  /** ttlMs / cacheScope of every skills result and skill file read (default 0 / private). */
  readonly cacheHint?: { readonly ttlMs: number; readonly cacheScope: 'public' | 'private' }
  /** Declare `directoryRead` and serve resources/directory/read (default true). */
  readonly directoryRead?: boolean
}

/** A skills server: a {@link TestServer} whose catalog can change. */
export interface SkillsTestServer extends TestServer {
  /** The skill files; change them, then `reload()`. */
  readonly files: Record<string, string>
  readonly catalog: SkillCatalog
  /** Rescans the files; tells listeners (resources/list_changed) when the listing changed. */
  reload(): Promise<void>
}

/**
 * Starts a 2026-07-28 server (2025-era requests served statelessly) on 127.0.0.1:0 with the
 * official SDK's skills extension (`@modelcontextprotocol/server/ext/skills`): a catalog built
 * from in-memory files with real SHA-256 digests, skills/list, skills/get, skill files through
 * resources/read and, unless turned off, resources/directory/read.
 */
export async function startSkillsServer(
  options: SkillsServerOptions = {},
): Promise<SkillsTestServer> {
  const name = options.name ?? 'skills-sdk'
  const files: Record<string, string> = { ...(options.files ?? DEFAULT_SKILLS) }
  const catalog = await SkillsExtension.load(memorySkillFiles(files), {
    ...(options.prefix !== undefined && { prefix: options.prefix }),
    ...(options.pageSize !== undefined && { pageSize: options.pageSize }),
    ...(options.cacheHint !== undefined && { cacheHint: options.cacheHint }),
    onWarning: () => {},
  })
  const extension =
    options.directoryRead === false ? withoutDirectories(catalog, files, options) : catalog
  const handler = createMcpHandler(
    () => {
      const server = new McpServer(
        { name, version: '1.0.0' },
        { capabilities: { resources: { listChanged: true } } },
      )
      extension.attach(server)
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
    files,
    catalog,
    notify: handler.notify,
    async reload() {
      const changes = await catalog.reload()
      if (changes.listChanged || changes.changed.length > 0) handler.notify.resourcesChanged()
    },
    async close() {
      await handler.close()
      await http.close()
    },
  }
}

/** The catalog's skills served by a source without readDirectory (no `directoryRead`). */
function withoutDirectories(
  catalog: SkillCatalog,
  files: Readonly<Record<string, string>>,
  options: SkillsServerOptions,
): SkillsExtension {
  const base = `skill://${options.prefix === undefined ? '' : `${options.prefix}/`}`
  const listed = (uri: string): boolean =>
    catalog.entries.some(
      (s) => Array.isArray(s.resources) && s.resources.some((r) => r.uri === uri),
    )
  const source: SkillSource = {
    list: () => Promise.resolve({ skills: [...catalog.entries] }),
    get: (uri) => Promise.resolve(catalog.entries.find((s) => s.uri === uri)),
    read: (uri) => {
      const text = listed(uri) ? files[uri.slice(base.length)] : undefined
      return Promise.resolve(text === undefined ? undefined : { text })
    },
  }
  return new SkillsExtension({
    source,
    baseUri: base,
    ...(options.cacheHint !== undefined && { cacheHint: options.cacheHint }),
    onWarning: () => {},
  })
}
