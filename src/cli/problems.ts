import { renderLocated } from '../config/located.js'
import type { ConfigError } from '../runtime/load.js'

/**
 * A config that failed to load, as the commands print it: a count, then each problem at its
 * `file:line:column` with the lines around it where its place is known (config/located.ts).
 */
export function problemsText(file: string, err: ConfigError): string {
  const each = err.located.map((p) => `  ${renderLocated(p).replaceAll('\n', '\n  ')}`)
  return `${file}: ${err.located.length} problem(s)\n${each.join('\n')}\n`
}
