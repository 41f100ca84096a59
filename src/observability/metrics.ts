import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import { ALL_METHODS } from '../mcp/methods.js'
import { LabelCounter } from './label-counter.js'
import { createRequestMetrics, type RequestMetrics } from './request-metrics.js'
import { createOperationMetrics, type OperationMetrics } from './operation-metrics.js'
import { ToolCatalog } from './tool-labels.js'

/**
 * Prometheus metrics of one gateway instance (own registry, so several gateways can live in one
 * process, as in tests). Labels come from closed sets only: server names from config, known
 * methods or "other", outcome codes from the error table — never a raw Mcp-Name, which would let
 * clients create a series per request.
 */
export interface GatewayMetrics {
  readonly registry: Registry
  /** mcp_edge_requests_total and mcp_edge_request_duration_seconds. */
  readonly requests: RequestMetrics
  /** mcp_server_operation_duration_seconds (OpenTelemetry MCP conventions, docs/operations.md). */
  readonly operations: OperationMetrics
  /** Tool names the backends listed: the only `gen_ai_tool_name` label values besides `other`. */
  readonly tools: ToolCatalog
  readonly upstreamFailures: Counter<'server' | 'upstream' | 'kind'>
  readonly retries: Counter<'server' | 'result'>
  readonly policyDecisions: Counter<'server' | 'decision'>
  readonly cacheEvents: Counter<'event'>
  /**
   * Answers to cacheable requests the cache could not keep, by why (cache/policy.ts
   * UncacheableReason): what the status page counts apart from misses.
   */
  readonly cacheUncacheable: LabelCounter<'server' | 'method' | 'reason'>
  readonly cacheBytes: Gauge
  readonly upstreamHealthy: Gauge<'server' | 'upstream'>
  /** Requests refused per limit; `limit` is a name from the policy files (a closed set). */
  readonly rateLimited: Counter<'limit'>
  /** Of those, new keys refused because the limit's table was full of callers not idle. */
  readonly rateLimitTableFull: Counter<'limit'>
  /** Rate decisions taken per replica because the configured Redis could not take them. */
  readonly rateLimitFallbacks: Counter
  /** Merged answers of a virtual server that left a member out (failed or too slow). */
  readonly virtualPartial: Counter<'server'>
  /** Definitions seen with another digest than their pin (docs/catalog.md §Run-time pinning). */
  readonly catalogDrift: Counter<'server' | 'kind'>
  /**
   * Requests cut at their own deadline (`timeouts.methods`, `.tools`, `.prompts`); `tool` is a
   * listed name or `other` (ToolCatalog), `none` for a method without one; `phase` is `head` or
   * `stream`.
   */
  readonly deadlineExceeded: Counter<'server' | 'method' | 'tool' | 'phase'>
}

/** Maps a method to a bounded label value. */
export function methodLabel(method: string | undefined): string {
  if (method === undefined) return 'none'
  return ALL_METHODS.has(method) ? method : 'other'
}

/** Creates the metric set; `defaults` adds process metrics (CPU, memory, event loop lag). */
export function createMetrics(defaults = true): GatewayMetrics {
  const registry = new Registry()
  if (defaults) collectDefaultMetrics({ register: registry, prefix: 'mcp_edge_' })
  const registers = [registry]
  return {
    registry,
    requests: createRequestMetrics(registry),
    operations: createOperationMetrics(registry),
    tools: new ToolCatalog(),
    upstreamFailures: new Counter({
      name: 'mcp_edge_upstream_failures_total',
      help: 'Failed upstream attempts',
      labelNames: ['server', 'upstream', 'kind'],
      registers,
    }),
    retries: new Counter({
      name: 'mcp_edge_retries_total',
      help: 'Retry decisions',
      labelNames: ['server', 'result'],
      registers,
    }),
    virtualPartial: new Counter({
      name: 'mcp_edge_virtual_partial_total',
      help: 'Merged virtual-server answers that left a member out',
      labelNames: ['server'],
      registers,
    }),
    catalogDrift: new Counter({
      name: 'mcp_edge_catalog_drift_total',
      help: 'Tool and prompt definitions seen with another digest than their pin',
      labelNames: ['server', 'kind'],
      registers,
    }),
    deadlineExceeded: new Counter({
      name: 'mcp_edge_deadline_exceeded_total',
      help: 'Requests cut at their per-method, per-tool or per-prompt deadline',
      labelNames: ['server', 'method', 'tool', 'phase'],
      registers,
    }),
    policyDecisions: new Counter({
      name: 'mcp_edge_policy_decisions_total',
      help: 'Policy decisions on named targets',
      labelNames: ['server', 'decision'],
      registers,
    }),
    cacheEvents: new Counter({
      name: 'mcp_edge_cache_events_total',
      help: 'Cache hits, misses, stores, evictions',
      labelNames: ['event'],
      registers,
    }),
    // Counted on the request path (every request a hit-for-pass key sends past the cache).
    cacheUncacheable: new LabelCounter(
      registry,
      'mcp_edge_cache_uncacheable_total',
      'Answers to cacheable requests the cache could not keep, by reason',
      ['server', 'method', 'reason'],
    ),
    cacheBytes: new Gauge({
      name: 'mcp_edge_cache_bytes',
      help: 'Bytes held by the in-memory cache',
      registers,
    }),
    upstreamHealthy: new Gauge({
      name: 'mcp_edge_upstream_healthy',
      help: '1 when a replica takes traffic',
      labelNames: ['server', 'upstream'],
      // With several workers /metrics shows 0 when any of them has the replica out.
      aggregator: 'min',
      registers,
    }),
    rateLimited: new Counter({
      name: 'mcp_edge_rate_limited_total',
      help: 'Requests refused by a rate or concurrency limit, per limit name',
      labelNames: ['limit'],
      registers,
    }),
    rateLimitTableFull: new Counter({
      name: 'mcp_edge_rate_limit_table_full_total',
      help: 'New keys refused because the limit kept no room for them (its table full of callers not idle)',
      labelNames: ['limit'],
      registers,
    }),
    rateLimitFallbacks: new Counter({
      name: 'mcp_edge_rate_limit_fallbacks_total',
      help: 'Rate decisions taken locally because the shared Redis could not take them',
      registers,
    }),
  }
}
