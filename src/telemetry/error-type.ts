/** Outcomes that are answers, not failures (the rest are error-table codes or forward results). */
const NOT_ERRORS: ReadonlySet<string> = new Set([
  'ok',
  'cache_hit',
  'cache_stale',
  'preflight',
  'tasks_list_local',
])

/**
 * `error.type` of a request (OpenTelemetry MCP conventions, recorded on spans and the operation
 * duration metric): the gateway's reason code (README error table) when it refused or failed the
 * request, the HTTP status for a 5xx the backend answered, else undefined. A closed set either way.
 */
export function errorType(outcome: string, status: number): string | undefined {
  if (!NOT_ERRORS.has(outcome)) return outcome
  return status >= 500 ? String(status) : undefined
}
