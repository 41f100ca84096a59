import type { VirtualServerConfig } from '../config/schema.js'
import { MemberEras } from '../client/era.js'
import { compilePattern, type Matcher } from '../match/pattern.js'
import { VirtualSessionCodec } from './client-session.js'
import { CursorCodec } from './cursor.js'
import { MergedCache } from './merged-cache.js'
import { VirtualState } from './state.js'
import { VirtualTaskCodec } from './tasks.js'

/** The config-derived half of a virtual server (the runtime adds its members and front). */
export interface VirtualCore {
  readonly name: string
  readonly config: VirtualServerConfig
  readonly memberNames: readonly string[]
  readonly state: VirtualState
  readonly cursors: CursorCodec
  /** Task ids this virtual server hands out, each naming its member (virtual/tasks.ts). */
  readonly tasks: VirtualTaskCodec
  /** `resources:` — the member configured for a URI two members serve, if a pattern matches. */
  readonly resourceRoute: (uri: string) => number | undefined
  /** Merged answers, when `cache:` is configured. */
  readonly merged: MergedCache | undefined
  /** The members' eras, and the sessions held toward 2025-only ones (client/era.ts). */
  readonly eras: MemberEras
  /** The gateway's own 2025-era client session ids (virtual/client-session.ts). */
  readonly clientSessions: VirtualSessionCodec
}

/** Compiles one `virtualServers.<name>` entry; `key` is the handle key (upstream/sessions.ts). */
export function compileVirtual(
  name: string,
  config: VirtualServerConfig,
  key: Buffer,
  /** `cache.maxTtlMs`; undefined without `cache:` (merged answers are then not kept). */
  maxTtlMs: number | undefined,
): VirtualCore {
  const memberNames = [...config.members]
  const routes: [Matcher, number][] = Object.entries(config.resources).map(([pattern, member]) => [
    compilePattern(pattern),
    memberNames.indexOf(member),
  ])
  return {
    name,
    config,
    memberNames,
    state: new VirtualState(memberNames, config.prefix, config.fanOutTimeoutMs),
    cursors: new CursorCodec(key),
    tasks: new VirtualTaskCodec(key, name),
    // Config order: the first pattern that matches decides.
    resourceRoute: (uri) => routes.find(([match]) => match(uri))?.[1],
    merged: maxTtlMs === undefined ? undefined : new MergedCache(maxTtlMs, name),
    eras: new MemberEras(),
    // The same key as every other handle (docs/balancing.md "Legacy sessions"): any gateway with
    // the same `legacySessions.key` opens the session.
    clientSessions: new VirtualSessionCodec(key, name),
  }
}
