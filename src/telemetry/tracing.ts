import { type Tracer } from '@opentelemetry/api'
import { W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  type SpanLimits,
} from '@opentelemetry/sdk-trace-base'
import { MAX_EXPORTED_CHARS } from '../observability/bound.js'

/** The `telemetry:` block of the config (src/config/schema.ts). */
interface TelemetryConfig {
  readonly otlp: { readonly endpoint: string; readonly headers: Readonly<Record<string, string>> }
  readonly sampleRatio: number
  readonly serviceName: string
  readonly propagateBaggage: boolean
}

/** A running tracer: one per gateway process, flushed on close. */
export interface Tracing {
  readonly tracer: Tracer
  readonly propagator: W3CTraceContextPropagator
  /**
   * With `telemetry.propagateBaggage: true` only: the client's W3C `baggage`, read and written
   * again by the W3C propagator (its format and size limits). Otherwise no client baggage reaches
   * a backend (mcp/owned-headers.ts), since a backend may read identity from it.
   */
  readonly baggage: W3CBaggagePropagator | undefined
  /** Exports what is buffered and stops the exporter (server close). */
  shutdown(): Promise<void>
}

/**
 * What one span may hold (OpenTelemetry SDK spec, Span Limits). Every client-derived value is cut
 * to the one bound before it is set (observability/bound.ts); the SDK limits hold that bound for
 * any value that did not pass through it, and bound the counts. A span holds everything it records
 * until it is exported, so these bound the memory the tracer takes per request in flight.
 */
const SPAN_LIMITS: Required<SpanLimits> = {
  attributeValueLengthLimit: MAX_EXPORTED_CHARS,
  // The request span sets about 20 (docs/operations.md "The span").
  attributeCountLimit: 64,
  // One per stage that marks it, one per upstream attempt, one per member of a fan-out.
  eventCountLimit: 128,
  attributePerEventCountLimit: 8,
  // The gateway makes no links.
  linkCountLimit: 0,
  attributePerLinkCountLimit: 0,
}

/**
 * Builds the OpenTelemetry SDK pieces without registering anything global: the gateway passes
 * contexts explicitly, so no context manager (AsyncLocalStorage) runs on any request, and several
 * gateways in one process (tests) keep their own exporters.
 */
export function createTracing(config: TelemetryConfig): Tracing {
  const exporter = new OTLPTraceExporter({
    // The endpoint is the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is; the signal path
    // is appended (OpenTelemetry SDK spec, OTLP exporter configuration §Endpoint URLs for OTLP/HTTP).
    url: `${config.otlp.endpoint.replace(/\/+$/, '')}/v1/traces`,
    headers: { ...config.otlp.headers },
  })
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName }),
    // A caller's sampling decision is followed; new traces are sampled at `sampleRatio`.
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampleRatio) }),
    // SECURITY: stated, not left to the SDK's defaults (no length limit) or OTEL_* variables.
    spanLimits: SPAN_LIMITS,
    spanProcessors: [new BatchSpanProcessor(exporter)],
  })
  return {
    tracer: provider.getTracer('mcp-edge'),
    propagator: new W3CTraceContextPropagator(),
    baggage: config.propagateBaggage ? new W3CBaggagePropagator() : undefined,
    shutdown: () => provider.shutdown(),
  }
}
