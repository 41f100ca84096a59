import { ConfigError, loadConfigFile } from '../runtime/load.js'
import { createLogger } from '../observability/log.js'
import { UserAuth, type Connection } from '../userauth/user-auth.js'
import { problemsText } from './problems.js'

/** Where the command writes. */
interface TokensIo {
  out(text: string): void
  err(text: string): void
}

/** How long the command waits for the shared store (Redis) to answer. */
const CONNECT_MS = 5_000

/**
 * `mcp-edge tokens list|revoke` (docs/auth.md §Per-user credentials): the users connected to
 * `userAuth` servers, from the store `userTokens` names, and their removal, revoked at the
 * service's AS where it has an RFC 7009 endpoint. Never prints a token. With the in-memory store
 * the tokens live in the running gateway process, which this command cannot reach.
 */
export async function tokensCommand(
  file: string,
  args: readonly string[],
  io: TokensIo,
): Promise<number> {
  const [verb] = args.filter((a, i) => !a.startsWith('-') && !isValue(args, i))
  if (verb !== 'list' && verb !== 'revoke') {
    io.err('mcp-edge tokens: name list or revoke\n')
    return 2
  }
  const subject = option(args, '--subject')
  const server = option(args, '--server')
  if (
    verb === 'revoke' &&
    subject === undefined &&
    server === undefined &&
    !args.includes('--all')
  ) {
    io.err('mcp-edge tokens revoke: name --subject, --server, or --all\n')
    return 2
  }
  let config
  try {
    config = loadConfigFile(file).config
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    io.err(problemsText(file, err))
    return 1
  }
  if (config.userTokens === undefined || config.auth === undefined) {
    io.err(`${file}: no userTokens configured\n`)
    return 1
  }
  // Revocations are audited as the gateway audits them: JSON lines on stderr.
  const log =
    verb === 'revoke' ? createLogger('info', { write: (line: string) => io.err(line) }) : undefined
  const users = new UserAuth({ log })
  try {
    const store = await users.store(config, CONNECT_MS)
    if (store?.kind === 'memory') {
      io.err(
        'mcp-edge tokens: userTokens has no redis: the tokens live in the memory of the running gateway process (its status page lists them)\n',
      )
      return 1
    }
    if (store?.ready !== true) {
      io.err('mcp-edge tokens: the userTokens redis did not answer\n')
      return 1
    }
    const match = (c: Connection): boolean =>
      (subject === undefined || c.sub === subject) && (server === undefined || c.server === server)
    if (verb === 'list') {
      const found = (await users.connections(config)).filter(match)
      io.out(args.includes('--json') ? `${JSON.stringify(found.map(shown))}\n` : table(found))
      return 0
    }
    const gone = await users.revoke(config, match)
    io.out(`revoked ${gone.length} connection${gone.length === 1 ? '' : 's'}\n`)
    return 0
  } finally {
    await users.close()
    log?.flush()
  }
}

/** What a connection shows: who, where, when; never a token. */
function shown(c: Connection): Record<string, unknown> {
  const time = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString())
  return c.sub === undefined
    ? { server: c.server, readable: false }
    : {
        server: c.server,
        iss: c.iss,
        sub: c.sub,
        connectedAt: time(c.connectedAt),
        refreshedAt: time(c.refreshedAt),
        expiresAt: time(c.expiresAt),
        refreshable: c.refreshable,
        readable: true,
      }
}

function table(found: readonly Connection[]): string {
  if (found.length === 0) return 'no connected users\n'
  const lines = found.map((c) =>
    c.sub === undefined
      ? `${c.server}\t(unreadable: sealed with another key)`
      : `${c.server}\t${c.sub}\t${c.iss ?? ''}\tconnected ${iso(c.connectedAt)}\texpires ${iso(c.expiresAt)}`,
  )
  return `${['server\tsubject\tissuer\tsince\texpiry', ...lines].join('\n')}\n`
}

function iso(ms: number | undefined): string {
  return ms === undefined ? '-' : new Date(ms).toISOString()
}

function option(args: readonly string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string
    if (a.startsWith(`${name}=`)) return a.slice(name.length + 1)
    if (a === name && i + 1 < args.length) return args[i + 1]
  }
  return undefined
}

/** Whether args[i] is the value of an option (`--subject alice`), not a word of its own. */
function isValue(args: readonly string[], i: number): boolean {
  const before = args[i - 1]
  return before !== undefined && ['--config', '-c', '--subject', '--server'].includes(before)
}
