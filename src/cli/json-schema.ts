import { z } from 'zod'
import { policyFileSchema } from '../policy/schema.js'
import { configSchema } from '../config/schema.js'

/**
 * JSON Schemas (draft 2020-12) for editors, generated from the zod schemas that validate at
 * startup, so the two can never disagree: `deploy/gateway.schema.json` for the gateway config and
 * `policies/schema.json` for policy files. Shipped YAML files name them in a
 * `# yaml-language-server: $schema=…` header; `npm run schema` rewrites both, and a unit test fails
 * when they are out of step.
 *
 * The input side is described (`io: 'input'`): keys with defaults are optional, as in the YAML.
 */
export const JSON_SCHEMAS = {
  config: {
    file: 'deploy/gateway.schema.json',
    title: 'mcp-edge gateway configuration',
    schema: configSchema,
  },
  policy: { file: 'policies/schema.json', title: 'mcp-edge policy file', schema: policyFileSchema },
} as const

export type SchemaName = keyof typeof JSON_SCHEMAS

/** The schema text as written to its file (stable key order, two-space indent, final newline). */
export function jsonSchemaText(name: SchemaName): string {
  const { schema, title } = JSON_SCHEMAS[name]
  // Refinements (`at least one server`, `a rule needs allow or deny`) have no JSON Schema form;
  // they are checked at load time with a message that names the path.
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' })
  return `${JSON.stringify({ title, ...json }, null, 2)}\n`
}
