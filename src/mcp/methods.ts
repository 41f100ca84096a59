/**
 * The one table of MCP methods the gateway knows: what each names, how it is listed, cached and
 * retried, and in which protocol revision a client may send it. Every other method list in the
 * gateway is derived from it, once, at module load (Sets and Maps; nothing per request).
 *
 * Client-to-server methods per revision, from the schemas:
 * - 2026-07-28 (schema.ts `ClientRequest`, `ClientNotification`): server/discover, the list, read,
 *   call and get methods, completion/complete, subscriptions/listen, notifications/cancelled and
 *   notifications/progress; the tasks extension (`io.modelcontextprotocol/tasks`) adds tasks/get,
 *   tasks/update and tasks/cancel. initialize, ping, logging/setLevel and resources/subscribe are
 *   gone (changelog §Major changes).
 * - 2025-11-25 and earlier: initialize, ping, logging/setLevel, resources/subscribe and
 *   unsubscribe, tasks/get, tasks/result, tasks/list, tasks/cancel and the 2025 notifications;
 *   client responses (no method) travel on this path too.
 * - The events extension (`io.modelcontextprotocol/events`, SEP-3415; docs/events.md), for clients
 *   of both revisions: events/list, events/poll, events/stream, events/subscribe and
 *   events/unsubscribe. Each names one event type in `params.name`, which the extension does not
 *   mirror into Mcp-Name, so policy reads it from the body. Its `notifications/events/*` travel
 *   only from server to client, on an events/stream answer: listed for metric labels, never
 *   accepted from a client.
 * - The skills extension (`io.modelcontextprotocol/skills`, SEP-2640; docs/extensions.md), relayed
 *   for clients of both revisions (a 2025-era server can serve it too): skills/list, skills/get and
 *   resources/directory/read. skills/get names a skill and resources/directory/read a directory
 *   by `params.uri`, which no header mirrors (skills.mdx §Getting a Skill, §Reading Directories),
 *   so policy reads it from the body.
 */

/** What `Mcp-Name` designates for a method (spec 2026-07-28 streamable-http §Standard Headers). */
export type NamedKind = 'tool' | 'prompt' | 'resource'

/** One method, as the gateway treats it. */
interface MethodSpec {
  /** The revisions whose clients may send it. */
  readonly eras: 'both' | 'modern' | 'legacy'
  readonly notification?: true
  /** Sent only by servers (on a stream): a metric label, never a method a client may send. */
  readonly fromServer?: true
  /** The target its Mcp-Name names (params.name, or params.uri for resources). */
  readonly named?: NamedKind
  /** A list method: the result array whose items policy filters. */
  readonly listKey?: 'tools' | 'prompts' | 'resources' | 'resourceTemplates' | 'events' | 'skills'
  /** A list method: the field of an item that names it (what policy judges, what routes). */
  readonly itemField?: 'name' | 'uri' | 'uriTemplate'
  /** A cacheable result's member that must be an array (its list, `contents`, `supportedVersions`). */
  readonly resultArray?: string
  /** A cacheable result's member that must be an object (skills/get's `skill`). */
  readonly resultObject?: string
  /**
   * Names one target in `params.uri` that no header mirrors (the skills extension): a skill by the
   * URI of its SKILL.md, or a directory resource. Policy reads it from the body.
   */
  readonly uriTarget?: 'skill' | 'directory'
  /** Its cache entries are tagged with `params.uri`, so a change to that URI drops them. */
  readonly keyedByUri?: true
  /** Its answer carries skill entries, checked before they are relayed (mcp/skill-answers.ts). */
  readonly skillEntries?: true
  /** Names a tool or prompt a catalog's curation renames (docs/catalog.md §Curation). */
  readonly curatedName?: true
  /**
   * What of its answer a catalog view curates and pins (docs/catalog.md §Curation, §Run-time
   * pinning): a list's items of that kind, or the server's `instructions` in discovery.
   */
  readonly curatedAnswer?: 'tools' | 'prompts' | 'instructions' | 'skills'
  /** caching.mdx §Cacheable Results: its results carry cache hints. */
  readonly cacheable?: true
  /** Only reads: safe to send again after it may have reached a replica. */
  readonly retrySafe?: true
  /** Policy names targets inside its body (not in Mcp-Name): parsed even for trusted backends. */
  readonly bodyTargets?: true
  /** Names one event type in `params.name` (the events extension; not mirrored into Mcp-Name). */
  readonly eventName?: true
  /**
   * A long-lived request whose answer is a stream of notifications: held under the stream
   * budgets, per caller and per replica, idle-timed between chunks only (docs/balancing.md
   * "Streams").
   */
  readonly stream?: true
  /** Where its arguments sit in `params` (what conditions and the audit read). */
  readonly arguments?: 'arguments' | 'argument'
}

const TABLE: Readonly<Record<string, MethodSpec>> = {
  // prettier-ignore
  'server/discover': { eras: 'modern', cacheable: true, retrySafe: true, resultArray: 'supportedVersions', curatedAnswer: 'instructions' },
  // prettier-ignore
  'tools/list': { eras: 'both', listKey: 'tools', itemField: 'name', cacheable: true, retrySafe: true, resultArray: 'tools', curatedAnswer: 'tools' },
  'tools/call': { eras: 'both', named: 'tool', curatedName: true, arguments: 'arguments' },
  // prettier-ignore
  'prompts/list': { eras: 'both', listKey: 'prompts', itemField: 'name', cacheable: true, retrySafe: true, resultArray: 'prompts', curatedAnswer: 'prompts' },
  // prettier-ignore
  'prompts/get': { eras: 'both', named: 'prompt', retrySafe: true, curatedName: true, arguments: 'arguments' },
  // prettier-ignore
  'resources/list': { eras: 'both', listKey: 'resources', itemField: 'uri', cacheable: true, retrySafe: true, resultArray: 'resources' },
  // prettier-ignore
  'resources/templates/list': { eras: 'both', listKey: 'resourceTemplates', itemField: 'uriTemplate', cacheable: true, retrySafe: true, resultArray: 'resourceTemplates' },
  // prettier-ignore
  'resources/read': { eras: 'both', named: 'resource', cacheable: true, retrySafe: true, resultArray: 'contents', keyedByUri: true },
  // prettier-ignore
  'completion/complete': { eras: 'both', retrySafe: true, bodyTargets: true, curatedName: true, arguments: 'argument' },
  'subscriptions/listen': { eras: 'modern', bodyTargets: true, stream: true },
  // The events extension (SEP-3415). A poll may consume what it returns (emit-only event types),
  // so it is never retried or cached; its cursor is relayed byte for byte.
  // prettier-ignore
  'events/list': { eras: 'both', listKey: 'events', itemField: 'name', retrySafe: true },
  'events/poll': { eras: 'both', bodyTargets: true, eventName: true },
  'events/stream': { eras: 'both', bodyTargets: true, eventName: true, stream: true },
  'events/subscribe': { eras: 'both', bodyTargets: true, eventName: true },
  'events/unsubscribe': { eras: 'both', bodyTargets: true, eventName: true },
  // The skills extension (SEP-2640). Both results are cacheable (skills.mdx §Listing Skills,
  // §Getting a Skill: `CacheableResult`); a directory read is a `PaginatedResult` only.
  // prettier-ignore
  'skills/list': { eras: 'both', listKey: 'skills', itemField: 'uri', cacheable: true, retrySafe: true, resultArray: 'skills', skillEntries: true, curatedAnswer: 'skills' },
  // prettier-ignore
  'skills/get': { eras: 'both', bodyTargets: true, uriTarget: 'skill', cacheable: true, retrySafe: true, resultObject: 'skill', keyedByUri: true, skillEntries: true, curatedAnswer: 'skills' },
  // prettier-ignore
  'resources/directory/read': { eras: 'both', bodyTargets: true, uriTarget: 'directory', retrySafe: true },
  'tasks/get': { eras: 'both', retrySafe: true },
  'tasks/update': { eras: 'modern' },
  'tasks/cancel': { eras: 'both' },
  'tasks/list': { eras: 'legacy' },
  'tasks/result': { eras: 'legacy' },
  initialize: { eras: 'legacy', curatedAnswer: 'instructions' },
  ping: { eras: 'legacy' },
  'logging/setLevel': { eras: 'legacy' },
  'resources/subscribe': { eras: 'legacy', bodyTargets: true },
  'resources/unsubscribe': { eras: 'legacy' },
  'notifications/cancelled': { eras: 'both', notification: true },
  'notifications/progress': { eras: 'both', notification: true },
  'notifications/initialized': { eras: 'legacy', notification: true },
  'notifications/roots/list_changed': { eras: 'legacy', notification: true },
  'notifications/tasks/status': { eras: 'legacy', notification: true },
  // prettier-ignore
  'notifications/events/active': { eras: 'both', notification: true, fromServer: true },
  // prettier-ignore
  'notifications/events/event': { eras: 'both', notification: true, fromServer: true },
  // prettier-ignore
  'notifications/events/heartbeat': { eras: 'both', notification: true, fromServer: true },
  // prettier-ignore
  'notifications/events/error': { eras: 'both', notification: true, fromServer: true },
  // prettier-ignore
  'notifications/events/terminated': { eras: 'both', notification: true, fromServer: true },
}

const rows = Object.entries(TABLE)
const namesWhere = (test: (m: MethodSpec) => boolean): ReadonlySet<string> =>
  new Set(rows.filter(([, m]) => test(m)).map(([name]) => name))

/** Methods a 2026-07-28 client may send. */
const MODERN_METHODS = namesWhere((m) => m.eras !== 'legacy' && m.fromServer !== true)
/** Methods a 2025-era client may send (responses carry no method). */
const LEGACY_METHODS = namesWhere((m) => m.eras !== 'modern' && m.fromServer !== true)
/** Every method in the table, for bounded metric labels. */
export const ALL_METHODS = namesWhere(() => true)

/** Methods whose `Mcp-Name` header is required, and what the name designates. */
export const NAMED_METHODS: ReadonlyMap<string, NamedKind> = new Map(
  rows.flatMap(([name, m]) => (m.named === undefined ? [] : [[name, m.named] as const])),
)

/** A method that designates one name: what it names, and where in `params` the name sits. */
export interface NameParam {
  readonly kind: NamedKind | 'event'
  readonly field: 'name' | 'uri'
}

/**
 * The methods that designate one name (`named`, `eventName`) and where it sits: the value Mcp-Name
 * mirrors, `params.uri` for a resource and `params.name` for a tool or prompt (spec 2026-07-28
 * streamable-http §Standard Headers), or the event type in `params.name` (SEP-3415).
 */
export const NAME_PARAMS: ReadonlyMap<string, NameParam> = new Map(
  rows.flatMap(([name, m]) => {
    const kind = m.named ?? (m.eventName === true ? 'event' : undefined)
    if (kind === undefined) return []
    return [[name, { kind, field: kind === 'resource' ? 'uri' : 'name' }] as const]
  }),
)

/** What a list method's items are: the result array they sit in and the field that names each. */
export interface ListItems {
  readonly key: NonNullable<MethodSpec['listKey']>
  readonly field: NonNullable<MethodSpec['itemField']>
}

/** The list methods, by name (no prototype): policy filters them, virtual servers merge them. */
export const LIST_METHODS: Readonly<Record<string, ListItems>> = Object.freeze(
  Object.assign(
    Object.create(null) as Record<string, ListItems>,
    Object.fromEntries(
      rows.flatMap(([name, m]) =>
        m.listKey === undefined || m.itemField === undefined
          ? []
          : [[name, { key: m.listKey, field: m.itemField }]],
      ),
    ),
  ),
)

/** Each cacheable method's result member that must be an array (no prototype). */
export const RESULT_ARRAYS: Readonly<Record<string, string>> = Object.freeze(
  Object.assign(
    Object.create(null) as Record<string, string>,
    Object.fromEntries(
      rows.flatMap(([name, m]) => (m.resultArray === undefined ? [] : [[name, m.resultArray]])),
    ),
  ),
)

/** Each cacheable method's result member that must be an object (no prototype). */
export const RESULT_OBJECTS: Readonly<Record<string, string>> = Object.freeze(
  Object.assign(
    Object.create(null) as Record<string, string>,
    Object.fromEntries(
      rows.flatMap(([name, m]) => (m.resultObject === undefined ? [] : [[name, m.resultObject]])),
    ),
  ),
)

/** The methods that name one skill or directory in `params.uri`, and which (the skills extension). */
export const URI_TARGETS: ReadonlyMap<string, 'skill' | 'directory'> = new Map(
  rows.flatMap(([name, m]) => (m.uriTarget === undefined ? [] : [[name, m.uriTarget] as const])),
)

/** The methods whose cache entries are tagged with `params.uri` (cache/key.ts keyUri). */
export const URI_KEYED_METHODS = namesWhere((m) => m.keyedByUri === true)

/** The methods whose answers carry skill entries (skills/list, skills/get). */
export const SKILL_ENTRY_METHODS = namesWhere((m) => m.skillEntries === true)

/** Methods whose tool or prompt name a catalog's curation renames. */
export const CURATED_NAME_METHODS = namesWhere((m) => m.curatedName === true)

type CuratedAnswer = NonNullable<MethodSpec['curatedAnswer']>

/** The answers a catalog view curates, by method (no prototype), and what in each. */
export const CURATED_ANSWERS: Readonly<Record<string, CuratedAnswer>> = Object.freeze(
  Object.assign(
    Object.create(null) as Record<string, CuratedAnswer>,
    Object.fromEntries(
      rows.flatMap(([name, m]) => (m.curatedAnswer === undefined ? [] : [[name, m.curatedAnswer]])),
    ),
  ),
)

/**
 * The methods whose results carry cache hints (caching.mdx §Cacheable Results): discovery and the
 * list and read methods. All of them only read, which retries rely on too.
 */
export const CACHEABLE_METHODS = namesWhere((m) => m.cacheable === true)

/**
 * Methods safe to send again after they may have reached a replica: reads without side effects.
 * tools/call, subscriptions/listen, tasks/update, notifications and any method not listed are
 * never retried once sent, as reverse proxies treat non-idempotent requests (RFC 9110 §9.2.2).
 */
export const RETRY_SAFE_METHODS = namesWhere((m) => m.retrySafe === true)

/** Methods whose policy targets are in the body, so policy needs the body parsed. */
export const BODY_TARGET_METHODS = namesWhere((m) => m.bodyTargets === true)

/** The events extension's methods that name one event type in `params.name`. */
export const EVENT_NAME_METHODS = namesWhere((m) => m.eventName === true)

/**
 * Where each method that carries arguments has them in `params` (spec 2026-07-28 server/tools,
 * server/prompts, server/utilities/completion): `arguments`, or completion's one `argument`.
 */
export const ARGUMENT_FIELDS: ReadonlyMap<string, string> = new Map(
  rows.flatMap(([name, m]) => (m.arguments === undefined ? [] : [[name, m.arguments] as const])),
)

const STREAM_METHODS = namesWhere((m) => m.stream === true)

/**
 * True for a long-lived request answered by a stream of notifications (subscriptions/listen,
 * events/stream): the one predicate every stream budget, cap and idle rule keys on.
 */
export function isStreamMethod(method: string | undefined): boolean {
  return method !== undefined && STREAM_METHODS.has(method)
}

/** True when a client of `era` may send `method` (exact case: method names are case-sensitive). */
export function isKnownMethod(era: 'modern' | 'legacy', method: string): boolean {
  return (era === 'modern' ? MODERN_METHODS : LEGACY_METHODS).has(method)
}

/** A method's letters and digits, lower-cased: `TOOLS/CALL`, `tools//call`, `Tools.Call ` all give `toolscall`. */
function skeleton(method: string): string {
  return method.toLowerCase().replace(/[^a-z0-9]/g, '')
}
const KNOWN_SKELETONS: ReadonlySet<string> = new Set([...ALL_METHODS].map(skeleton))

/**
 * True when `method` could be read as one of the protocol's own methods by a lenient backend
 * (case-insensitive, or ignoring separators and spaces). Such a name is never an extra method,
 * whatever `extraMethods` says, so `*` cannot let `TOOLS/CALL` past the tool checks.
 */
export function resemblesKnownMethod(method: string): boolean {
  return KNOWN_SKELETONS.has(skeleton(method))
}
