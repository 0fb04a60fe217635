// A real S3 server for a tap test: Ceph's radosgw, started by scripts/s3-server.sh in a
// temporary directory of its own (so test files can each run one at once) and stopped by the
// test's teardown. No mock: the product's S3 code meets a real server's answers and faults.
import { randomBytes } from 'node:crypto'
import * as fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3'
import type { Test } from 'tap'
import { ROOT, spawnAsync } from './helpers.js'

export const S3_SCRIPT = join(ROOT, 'scripts', 's3-server.sh')
export const S3_INSTALL = 'apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd'

export interface S3Server {
  /** http://127.0.0.1:PORT */
  endpoint: string
  accessKeyId: string
  secretAccessKey: string
  region: string
  /** CPFS_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION: for child processes. */
  env: Record<string, string>
  /** The directory with the server's config, data and logs (log/client.rgw.log, …). */
  dir: string
  /** A new client (path-style: radosgw has no DNS name for virtual-host buckets). */
  client: () => S3Client
  /** Creates a bucket (a fresh unique name unless one is given) and returns its name. */
  bucket: (name?: string) => Promise<string>
  /** SIGKILL radosgw only: connections are refused until startGateway(). */
  killGateway: () => Promise<void>
  /** Start radosgw again on the same port; resolves once it answers. */
  startGateway: () => Promise<void>
}

function installed (): boolean {
  return ['radosgw', 'radosgw-admin', 'ceph-mon', 'ceph-osd', 'monmaptool'].every(b => fs.existsSync(`/usr/bin/${b}`))
}

/**
 * Whether the S3 tests can run. Without radosgw the test FAILS, naming the install command;
 * with CPFS_SKIP_S3=1 it is skipped instead, loudly (never a silent pass). Guard a test with
 * it, as with fuseAvailable, where a skip must be possible: s3Server() cannot skip halfway.
 */
export function s3Available (t: Test): boolean {
  if (installed()) return true
  const why = `radosgw is not installed (as root: ${S3_INSTALL})`
  if (process.env.CPFS_SKIP_S3 === '1') {
    process.stderr.write(`\n!!! SKIPPING S3 TESTS: ${why}. CPFS_SKIP_S3=1 is set; push, clone and the S3 facts go untested.\n\n`)
    t.skip(`SKIPPED LOUDLY (CPFS_SKIP_S3=1): ${why}`)
    return false
  }
  t.fail(`S3 tests cannot run: ${why}. Set CPFS_SKIP_S3=1 to skip them instead.`)
  return false
}

let counter = 0

/** Starts a server in a fresh temporary directory; the test's teardown stops it and removes the directory. */
export async function s3Server (t: Test): Promise<S3Server> {
  if (!s3Available(t)) throw new Error(`s3Server: no radosgw (${S3_INSTALL})${process.env.CPFS_SKIP_S3 === '1' ? '; to skip, guard the test with s3Available(t)' : ''}`)
  const dir = fs.mkdtempSync(join(tmpdir(), `cpfs-s3-${process.pid}-${counter++}-`))
  const script = async (cmd: string): Promise<string> => {
    // The first start creates pools; a generous bound that only a broken server reaches.
    const r = await spawnAsync('bash', [S3_SCRIPT, cmd, dir], { env: process.env, cwd: ROOT, timeout: 180_000 })
    if (r.code !== 0) throw new Error(`scripts/s3-server.sh ${cmd} ${dir} exited ${r.code}:\n${r.stderr.trim()}`)
    return r.stdout
  }
  // Registered before the start: a start that failed halfway is cleaned up too.
  t.teardown(async () => {
    try {
      await script('stop')
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
  const env: Record<string, string> = {}
  for (const line of (await script('start')).split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line)
    if (m) env[m[1]] = m[2]
  }
  const endpoint = env.CPFS_S3_ENDPOINT
  if (!endpoint || !env.AWS_ACCESS_KEY_ID || !env.AWS_SECRET_ACCESS_KEY) throw new Error(`scripts/s3-server.sh start printed no endpoint or keys: ${JSON.stringify(env)}`)
  const s: S3Server = {
    endpoint,
    accessKeyId: env.AWS_ACCESS_KEY_ID,
    secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
    region: env.AWS_REGION ?? 'us-east-1',
    env,
    dir,
    client: () => new S3Client({
      endpoint,
      region: s.region,
      forcePathStyle: true,
      credentials: { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey }
    }),
    bucket: async (name?: string) => {
      const bucket = name ?? `t-${process.pid}-${randomBytes(6).toString('hex')}`
      const c = s.client()
      try {
        await c.send(new CreateBucketCommand({ Bucket: bucket }))
      } finally {
        c.destroy()
      }
      return bucket
    },
    killGateway: async () => { await script('kill-gateway') },
    startGateway: async () => { await script('start-gateway') }
  }
  return s
}
