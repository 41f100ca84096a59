import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { onTestFinished } from 'vitest'

/** A self-signed certificate for 127.0.0.1 (openssl), valid for a day. */
export async function selfSigned(): Promise<{ key: string; cert: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'mcp-edge-tls-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  const key = join(dir, 'key.pem')
  const cert = join(dir, 'cert.pem')
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '1',
    '-subj',
    '/CN=127.0.0.1',
    '-addext',
    'subjectAltName=IP:127.0.0.1',
  ])
  return { key: await readFile(key, 'utf8'), cert: await readFile(cert, 'utf8') }
}
