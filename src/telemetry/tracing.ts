import { type Tracer } from '@opentelemetry/api'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base'

/** The `telemetry:` block of the config (src/config/schema.ts). */
interface TelemetryConfig {
  readonly otlp: { readonly endpoint: string; readonly headers: Readonly<Record<string, string>> }
  readonly sampleRatio: number
  readonly serviceName: string
}

/** A running tracer: one per gateway process, flushed on close. */
export interface Tracing {
  readonly tracer: Tracer
  readonly propagator: W3CTraceContextPropagator
  /** Exports what is buffered and stops the exporter (server close). */
  shutdown(): Promise<void>
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
    spanProcessors: [new BatchSpanProcessor(exporter)],
  })
  return {
    tracer: provider.getTracer('mcp-edge'),
    propagator: new W3CTraceContextPropagator(),
    shutdown: () => provider.shutdown(),
  }
}
