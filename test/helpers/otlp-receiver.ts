import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { onTestFinished } from 'vitest'

/** A span as the OTLP/HTTP JSON exporter encodes it (OTLP spec, JSON Protobuf Encoding). */
export interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: readonly { key: string; value: Record<string, unknown> }[]
  readonly events?: readonly { name: string; attributes?: OtlpSpan['attributes'] }[]
  readonly status?: { code?: number }
}

/** A real OTLP/HTTP receiver: node:http, decoding the JSON the exporter sends to /v1/traces. */
export async function startReceiver() {
  const spans: OtlpSpan[] = []
  const posts: { url: string; headers: IncomingHttpHeaders }[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      posts.push({ url: req.url ?? '', headers: req.headers })
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[]
      }
      for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans)
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { spans, posts, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

/** Attribute values flattened (OTLP AnyValue: stringValue, intValue …). */
export function attrs(
  span: { readonly attributes?: OtlpSpan['attributes'] } | undefined,
): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const a of span?.attributes ?? []) out[a.key] = Object.values(a.value)[0]
  return out
}

/** Every value of header `name` (lower-case) in a raw [name, value, …] list. */
export function header(raw: readonly string[], name: string): string[] {
  const out: string[] = []
  for (let i = 0; i < raw.length; i += 2)
    if ((raw[i] as string).toLowerCase() === name) out.push(raw[i + 1] as string)
  return out
}
