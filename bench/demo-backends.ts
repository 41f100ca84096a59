/**
 * The official-SDK demo servers (`npm start` runs the same two, deploy/demo/) as bench backends, on
 * ports the OS picks. Prints `listening <weather port> <docs port>`.
 *
 * Usage: node --import tsx bench/demo-backends.ts [--lifeline]
 *   --lifeline   exit when stdin closes (the bench runner holds it open), so no orphan survives
 */
import { ANY_PORTS, startDemoServers } from '../deploy/demo/servers.js'

async function main(): Promise<void> {
  const demo = await startDemoServers(ANY_PORTS)
  process.stdout.write(`listening ${demo.weather.port} ${demo.docs.port}\n`)
  if (process.argv.includes('--lifeline')) {
    process.stdin.on('close', () => process.exit(0))
    process.stdin.resume()
  }
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(0))
}

void main()
