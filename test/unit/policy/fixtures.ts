import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { onTestFinished } from 'vitest'
import { parse } from 'yaml'
import type { PolicyCaller } from '../../../src/match/claims.js'
import { compileRule, RuleMemo } from '../../../src/policy/compile.js'
import { PolicySet, type PolicyMode } from '../../../src/policy/policy.js'
import { policyFileSchema } from '../../../src/policy/schema.js'

/** Compiles policy YAML in memory (schema-checked, like the loader). */
export function policyOf(
  yaml: string,
  mode: PolicyMode = 'enforce',
  servers = ['weather', 'docs'],
): PolicySet {
  const file = policyFileSchema.parse(parse(yaml))
  // One memo for the file, as the loader compiles a policy (rules share what they can).
  const memo = new RuleMemo()
  const rules = (file.rules ?? []).map((rule, i) =>
    compileRule({ rule, source: `test.yaml rules[${i}]` }, memo),
  )
  return new PolicySet(rules, mode, 'test', servers)
}

/** A verified caller with these claims (sub and iss default to alice at the test IdP). */
export function caller(claims: Record<string, unknown> = {}): PolicyCaller {
  const all = { sub: 'alice', iss: 'https://idp.test', ...claims }
  return { subject: String(all.sub), issuer: String(all.iss), claims: all }
}

/** A temporary folder holding `files` (name → content), removed when the test ends. */
export function tempFolder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-edge-policy-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  for (const [name, text] of Object.entries(files)) {
    const path = join(dir, name)
    mkdirSync(join(path, '..'), { recursive: true })
    writeFileSync(path, text)
  }
  return dir
}
