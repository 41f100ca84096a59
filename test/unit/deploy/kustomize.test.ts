import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, mkdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parse, parseAllDocuments } from 'yaml'

/**
 * Renders every overlay of deploy/kubernetes with `kubectl kustomize` (CI installs the Debian
 * package kubernetes-client, whose kustomize is v2.0.3) and checks the objects against the
 * gateway config they carry. Outside CI a machine without kubectl skips, saying so; in CI it runs.
 */
const KUBECTL = process.env['KUBECTL'] ?? 'kubectl'
const OVERLAYS = ['single', 'ha-redis'] as const
const haveKubectl = spawnSync(KUBECTL, ['version', '--client'], { stdio: 'ignore' }).status === 0
const skip = !haveKubectl && process.env['CI'] !== 'true'

/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects, read field by field */
type Obj = Record<string, any>

function render(overlay: string): Obj[] {
  const text = execFileSync(KUBECTL, ['kustomize', `deploy/kubernetes/overlays/${overlay}`], {
    encoding: 'utf8',
  })
  return parseAllDocuments(text).map((d) => d.toJS() as Obj)
}

function one(objs: readonly Obj[], kind: string, name: string): Obj {
  const found = objs.filter((o) => o['kind'] === kind && o['metadata']?.['name'] === name)
  expect(found, `${kind}/${name}`).toHaveLength(1)
  return found[0] as Obj
}

function selects(selector: Obj, labels: Obj | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v)
}

describe.skipIf(skip)(
  `kustomize overlays${skip ? ' (skipped: kubectl not found; apt-get install kubernetes-client)' : ''}`,
  () => {
    describe.each(OVERLAYS)('overlay %s', (overlay) => {
      let cached: ReturnType<typeof load> | undefined
      const load = () => {
        const objs = render(overlay)
        const configMap = one(objs, 'ConfigMap', 'mcp-edge-config')
        const config = parse(configMap['data']['gateway.yaml'] as string) as Obj
        const deployment = one(objs, 'Deployment', 'mcp-edge')
        const pod = deployment['spec']['template'] as Obj
        const container = (pod['spec']['containers'] as Obj[]).find(
          (c) => c['name'] === 'mcp-edge',
        ) as Obj
        return { objs, configMap, config, deployment, pod, container }
      }
      // Rendered once per overlay, on first use (never at collection, so a skip needs no kubectl).
      const rendered = (): ReturnType<typeof load> => (cached ??= load())
      const port = (name: string): number =>
        (rendered().container['ports'] as Obj[]).find((p) => p['name'] === name)?.[
          'containerPort'
        ] as number
      const mount = (volume: string): Obj =>
        (rendered().container['volumeMounts'] as Obj[]).find((m) => m['name'] === volume) as Obj
      const volume = (name: string): Obj =>
        (rendered().pod['spec']['volumes'] as Obj[]).find((v) => v['name'] === name) as Obj

      it('carries a config that passes mcp-edge check, with the container env as its secrets', () => {
        const { objs, configMap, config, container } = rendered()
        const dir = mkdtempSync(join(tmpdir(), `mcp-edge-k8s-${overlay}-`))
        const policies = join(dir, 'policies')
        mkdirSync(policies)
        const policyMap = one(objs, 'ConfigMap', 'mcp-edge-policies')
        for (const [name, text] of Object.entries(policyMap['data'] as Record<string, string>))
          writeFileSync(join(policies, name), text)
        const text = (configMap['data']['gateway.yaml'] as string).replace(
          `policies: ${config['policies'] as string}`,
          `policies: ${policies}`,
        )
        writeFileSync(join(dir, 'gateway.yaml'), text)
        // Exactly the variables the pod has: a ${VAR} it lacks fails the check.
        const env: Record<string, string> = { PATH: process.env['PATH'] ?? '' }
        for (const e of container['env'] as Obj[])
          env[e['name'] as string] = 'secret-value-of-the-check'
        // The compiled binary when there is one (CI builds it in npm ci), else the source.
        const cli = existsSync('dist/cli.js') ? ['dist/cli.js'] : ['--import', 'tsx', 'src/cli.ts']
        const out = spawnSync(
          process.execPath,
          [...cli, 'check', '--config', join(dir, 'gateway.yaml')],
          { encoding: 'utf8', env },
        )
        expect(out.stderr + out.stdout).toMatch(/: ok: \d+ servers? \(\d+ replicas?\)/)
        expect(out.status).toBe(0)
      })

      it('mounts config and policies as whole ConfigMap folders the watcher can reload', () => {
        const { config, container } = rendered()
        const args = container['args'] as string[]
        const file = args[args.indexOf('--config') + 1]
        expect(file).toBe(`${mount('config')['mountPath'] as string}/gateway.yaml`)
        expect(volume('config')['configMap']['name']).toBe('mcp-edge-config')
        expect(mount('policies')['mountPath']).toBe(config['policies'])
        expect(volume('policies')['configMap']['name']).toBe('mcp-edge-policies')
        // A subPath mount never sees a ConfigMap update.
        for (const m of container['volumeMounts'] as Obj[]) expect(m['subPath']).toBeUndefined()
      })

      it('exposes the configured ports and probes the health endpoints', () => {
        const { objs, config, pod, container } = rendered()
        expect(config['listen']).toMatchObject({ host: '0.0.0.0' })
        expect(config['admin']).toMatchObject({ host: '0.0.0.0' })
        expect(port('http')).toBe(config['listen']['port'])
        expect(port('admin')).toBe(config['admin']['port'])
        expect(container['readinessProbe']['httpGet']).toEqual({ path: '/readyz', port: 'http' })
        expect(container['livenessProbe']['httpGet']).toEqual({ path: '/healthz', port: 'http' })
        const labels = pod['metadata']['labels'] as Obj
        const data = one(objs, 'Service', 'mcp-edge')
        expect(selects(data['spec']['selector'] as Obj, labels)).toBe(true)
        expect(data['spec']['ports']).toEqual([expect.objectContaining({ targetPort: 'http' })])
        const admin = one(objs, 'Service', 'mcp-edge-admin')
        expect(selects(admin['spec']['selector'] as Obj, labels)).toBe(true)
        expect(admin['spec']['ports']).toEqual([expect.objectContaining({ targetPort: 'admin' })])
        const monitor = one(objs, 'ServiceMonitor', 'mcp-edge')
        const wanted = monitor['spec']['selector']['matchLabels'] as Obj
        expect(selects(wanted, admin['metadata']['labels'] as Obj)).toBe(true)
        expect(selects(wanted, data['metadata']['labels'] as Obj)).toBe(false) // not the data plane
        expect(monitor['spec']['endpoints']).toEqual([
          expect.objectContaining({ port: 'admin', path: '/metrics' }),
        ])
      })

      it('gives a draining gateway longer than shutdown.drainMs before SIGKILL', () => {
        const { config, pod } = rendered()
        const drainMs = (config['shutdown']?.['drainMs'] as number | undefined) ?? 30_000
        const grace = pod['spec']['terminationGracePeriodSeconds'] as number
        expect(grace * 1000).toBeGreaterThanOrEqual(drainMs + 5000)
        expect(grace * 1000).toBeLessThanOrEqual(drainMs + 15_000)
      })

      it('runs non-root on a read-only root filesystem', () => {
        const { objs, pod } = rendered()
        expect(pod['spec']['securityContext']).toMatchObject({ runAsNonRoot: true })
        for (const d of objs.filter((o) => o['kind'] === 'Deployment')) {
          const spec = d['spec']['template']['spec'] as Obj
          expect(spec['securityContext']).toMatchObject({ runAsNonRoot: true })
          for (const c of spec['containers'] as Obj[])
            expect(c['securityContext']).toMatchObject({
              readOnlyRootFilesystem: true,
              allowPrivilegeEscalation: false,
            })
        }
      })

      it('scales and protects the gateway Deployment', () => {
        const { objs, deployment, pod } = rendered()
        const hpa = one(objs, 'HorizontalPodAutoscaler', 'mcp-edge')
        expect(hpa['spec']['scaleTargetRef']).toMatchObject({
          kind: 'Deployment',
          name: 'mcp-edge',
        })
        const pdb = one(objs, 'PodDisruptionBudget', 'mcp-edge')
        expect(
          selects(pdb['spec']['selector']['matchLabels'] as Obj, pod['metadata']['labels']),
        ).toBe(true)
        // The PDB never selects the Redis pods, nor does any gateway Service.
        for (const d of objs.filter((o) => o['kind'] === 'Deployment' && o !== deployment))
          expect(
            selects(
              pdb['spec']['selector']['matchLabels'] as Obj,
              d['spec']['template']['metadata']['labels'],
            ),
          ).toBe(false)
      })

      if (overlay === 'ha-redis')
        it('points the cache and the rate limits at the Redis it ships', () => {
          const { objs, config } = rendered()
          const url = new URL(
            (config['cache']['redis'] as string).replace('${REDIS_PASSWORD}', 'x'),
          )
          const service = one(objs, 'Service', url.hostname)
          expect(service['spec']['ports']).toEqual([
            expect.objectContaining({ port: Number(url.port) }),
          ])
          const redis = one(objs, 'Deployment', 'mcp-edge-redis')
          expect(
            selects(
              service['spec']['selector'] as Obj,
              redis['spec']['template']['metadata']['labels'],
            ),
          ).toBe(true)
          expect(config['rateLimits']).toMatchObject({ redis: 'cache' })
        })
    })
  },
)
