import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { JSON_SCHEMAS, jsonSchemaText, type SchemaName } from '../../../src/cli/json-schema.js'

/** The shipped JSON Schemas are generated from the zod schemas; `npm run schema` rewrites them. */
describe('shipped JSON Schemas', () => {
  it.each(Object.keys(JSON_SCHEMAS) as SchemaName[])('%s schema matches the zod schema', (name) => {
    const shipped = readFileSync(JSON_SCHEMAS[name].file, 'utf8')
    expect(shipped, `run "npm run schema": ${JSON_SCHEMAS[name].file} is out of date`).toBe(
      jsonSchemaText(name),
    )
  })

  it('refuses unknown keys, as the loader does, so editors flag typos', () => {
    const config = JSON.parse(jsonSchemaText('config')) as {
      additionalProperties: boolean
      properties: { servers: { additionalProperties: { additionalProperties: boolean } } }
    }
    expect(config.additionalProperties).toBe(false)
    expect(config.properties.servers.additionalProperties.additionalProperties).toBe(false)
    const policy = JSON.parse(jsonSchemaText('policy')) as {
      properties: { rules: { items: { additionalProperties: boolean } } }
    }
    expect(policy.properties.rules.items.additionalProperties).toBe(false)
  })

  it.each([
    ['deploy/gateway.demo.yaml', './gateway.schema.json'],
    ['deploy/gateway.example.yaml', './gateway.schema.json'],
    ['policies/default.yaml', './schema.json'],
    ['policies/examples/claims.yaml', '../schema.json'],
    ['policies/examples/dry-run.yaml', '../schema.json'],
    ['policies/examples/limits.yaml', '../schema.json'],
    ['policies/examples/per-server.yaml', '../schema.json'],
  ])('%s names its schema for yaml-language-server', (file, ref) => {
    const first = readFileSync(file, 'utf8').split('\n')[0]
    expect(first).toBe(`# yaml-language-server: $schema=${ref}`)
  })
})
