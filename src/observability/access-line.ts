import type { Logger } from 'pino'
import { bounded } from './bound.js'
import { quote, quoteId, type LineSink } from './line-sink.js'

/** The fields of one access-log line. */
interface AccessFields {
  /** The gateway's id of the request (pipeline/access-log.ts): a UUID, never client text. */
  readonly requestId: string
  readonly server: string | undefined
  readonly method: string | undefined
  readonly name: string | undefined
  readonly era: string | undefined
  readonly status: number
  readonly upstream: string | undefined
  readonly outcome: string
  readonly ms: number
}

/** Writes access lines; `sink` is there for other hand-serialised lines (audit.ts). */
export interface AccessWriter {
  readonly write: ((f: AccessFields) => void) | undefined
  readonly sink: LineSink | undefined
  flush(): void
  close(): void
}

/**
 * Writes access-log lines in pino's own format (`msg: "request"`) through the sink, serialising
 * the nine known fields by hand. Without a sink (pino did not expose its destination) lines go
 * through log.info; below `info` there are none.
 */
export function createAccessWriter(log: Logger, sink: LineSink | undefined): AccessWriter {
  const ends = { flush: () => sink?.flush(), close: () => sink?.close() }
  if (!log.isLevelEnabled('info')) return { write: undefined, sink, ...ends }
  if (sink === undefined) {
    const write = (f: AccessFields): void =>
      log.info(
        {
          ...f,
          method: f.method && bounded(f.method),
          name: f.name && bounded(f.name),
          upstream: f.upstream && bounded(f.upstream),
        },
        'request',
      )
    return { write, sink, ...ends }
  }
  const write = (f: AccessFields): void => {
    let line = `${sink.head()},"requestId":${quoteId(bounded(f.requestId))}`
    if (f.server !== undefined) line += `,"server":${str(f.server)}`
    if (f.method !== undefined) line += `,"method":${str(f.method)}`
    if (f.name !== undefined) line += `,"name":${str(f.name)}`
    if (f.era !== undefined) line += `,"era":"${f.era}"`
    line += `,"status":${f.status}`
    if (f.upstream !== undefined) line += `,"upstream":${str(f.upstream)}`
    line += `,"outcome":${str(f.outcome)},"ms":${f.ms},"msg":"request"}\n`
    sink.emit(line)
  }
  return { write, sink, ...ends }
}

/** JSON string, within the one bound on client-derived values (observability/bound.ts). */
function str(s: string): string {
  return quote(bounded(s))
}
