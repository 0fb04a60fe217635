// The test S3 server itself (scripts/s3-server.sh, test/s3-server.ts) and the S3 facts that
// cpfs push and clone rely on, checked on the real server: paged listings, conditional
// create (one winner among racers), compare-and-swap on the ETag, ranged reads, batch
// deletes, and a gateway killed and started again.
import t from 'tap'
import * as fs from 'node:fs'
import { DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { ROOT, spawnAsync } from './helpers.js'
import { S3_SCRIPT, s3Available, s3Server } from './s3-server.js'

/** The HTTP status of a failed request (undefined when none came back: refused, reset). */
function status (err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode
}

/** The status each request ended with: 200 for success. */
async function outcomes (requests: Array<Promise<unknown>>): Promise<Array<number | string>> {
  const settled = await Promise.allSettled(requests)
  return settled.map(r => r.status === 'fulfilled' ? 200 : status(r.reason) ?? String(r.reason))
}

async function text (c: S3Client, Bucket: string, Key: string): Promise<{ body: string, etag: string }> {
  const r = await c.send(new GetObjectCommand({ Bucket, Key }))
  return { body: await r.Body!.transformToString(), etag: r.ETag ?? '' }
}

if (s3Available(t)) {
  t.test('a real S3 server (radosgw)', async t => {
    const s3 = await s3Server(t)
    const c = s3.client()
    t.teardown(() => c.destroy())

    t.test('the start script: env lines, DIR/env, 127.0.0.1 only, a second start refused', async t => {
      t.match(s3.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/)
      t.same(Object.keys(s3.env).sort(), ['AWS_ACCESS_KEY_ID', 'AWS_REGION', 'AWS_SECRET_ACCESS_KEY', 'CPFS_S3_ENDPOINT'])
      t.equal(s3.region, 'us-east-1')
      const written = fs.readFileSync(`${s3.dir}/env`, 'utf8')
      t.equal(written, Object.entries(s3.env).map(([k, v]) => `${k}=${v}\n`).join(''), 'DIR/env holds the same lines')
      const r = await spawnAsync('bash', [S3_SCRIPT, 'start', s3.dir], { env: process.env, cwd: ROOT, timeout: 60_000 })
      t.not(r.code, 0)
      t.match(r.stderr, /^s3-server: a server already runs in .* \(stop it first: .*stop .*\)$/m)
      const conf = fs.readFileSync(`${s3.dir}/ceph.conf`, 'utf8')
      t.match(conf, /^rgw frontends = beast endpoint=127\.0\.0\.1:\d+$/m)
      t.match(conf, /^mon host = v2:127\.0\.0\.1:\d+$/m)
    })

    t.test('put, get, and a listing read in pages', async t => {
      const bucket = await s3.bucket()
      const keys = Array.from({ length: 23 }, (_, i) => `p/k${String(i).padStart(3, '0')}`)
      await Promise.all(keys.map(Key => c.send(new PutObjectCommand({ Bucket: bucket, Key, Body: `body of ${Key}` }))))
      await c.send(new PutObjectCommand({ Bucket: bucket, Key: 'other/x', Body: 'x' }))
      t.same((await text(c, bucket, 'p/k007')).body, 'body of p/k007')
      const listed: string[] = []
      let pages = 0
      let token: string | undefined
      do {
        const r = await c.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'p/', MaxKeys: 5, ContinuationToken: token }))
        pages++
        t.ok((r.Contents ?? []).length <= 5, 'a page holds at most MaxKeys keys')
        listed.push(...(r.Contents ?? []).map(o => o.Key!))
        token = r.IsTruncated === true ? r.NextContinuationToken : undefined
      } while (token !== undefined && pages < 20)
      t.equal(pages, 5, '23 keys at 5 a page')
      t.same(listed, keys, 'every key under the prefix once, in order')
    })

    t.test('conditional create (If-None-Match: *): one winner among racers', async t => {
      const bucket = await s3.bucket()
      const racers = Array.from({ length: 12 }, () => s3.client())
      t.teardown(() => racers.forEach(r => r.destroy()))
      for (let round = 0; round < 3; round++) {
        const Key = `ref${round}`
        const got = await outcomes(racers.map((r, i) => r.send(new PutObjectCommand({ Bucket: bucket, Key, Body: `racer ${i}`, IfNoneMatch: '*' }))))
        t.equal(got.filter(s => s === 200).length, 1, `round ${round}: exactly one winner (${got.join(' ')})`)
        t.ok(got.every(s => s === 200 || s === 412 || s === 409), 'the others lost with 412 (or 409, as AWS may say)')
        t.equal((await text(c, bucket, Key)).body, `racer ${got.indexOf(200)}`, 'the object is the winner\'s')
      }
    })

    t.test('compare-and-swap with If-Match', async t => {
      const bucket = await s3.bucket()
      await c.send(new PutObjectCommand({ Bucket: bucket, Key: 'ref', Body: 'v1' }))
      const v1 = await text(c, bucket, 'ref')
      t.match(v1.etag, /^"[0-9a-f]{32}"$/, 'GET returns the ETag in quotes')
      const bare = v1.etag.replace(/"/g, '')
      let quoted: number | string = 200
      try {
        await c.send(new PutObjectCommand({ Bucket: bucket, Key: 'ref', Body: 'quoted', IfMatch: v1.etag }))
      } catch (err) { quoted = status(err) ?? String(err) }
      t.equal(quoted, 412, 'Ceph compares If-Match literally: the quoted ETag never matches (src/remote/s3.ts sends it bare)')
      await c.send(new PutObjectCommand({ Bucket: bucket, Key: 'ref', Body: 'v2', IfMatch: bare }))
      t.equal((await text(c, bucket, 'ref')).body, 'v2', 'the bare current ETag swaps')
      const stale = await outcomes([c.send(new PutObjectCommand({ Bucket: bucket, Key: 'ref', Body: 'v3', IfMatch: bare }))])
      t.same(stale, [412], 'a stale ETag: 412')
      const missing = await outcomes([c.send(new PutObjectCommand({ Bucket: bucket, Key: 'no-such-ref', Body: 'x', IfMatch: bare }))])
      t.same(missing, [412], 'If-Match on a missing key: Ceph says 412 (AWS says 404)')
      const v2 = await text(c, bucket, 'ref')
      const racers = Array.from({ length: 12 }, () => s3.client())
      t.teardown(() => racers.forEach(r => r.destroy()))
      const got = await outcomes(racers.map((r, i) => r.send(new PutObjectCommand({ Bucket: bucket, Key: 'ref', Body: `swap ${i}`, IfMatch: v2.etag.replace(/"/g, '') }))))
      t.equal(got.filter(s => s === 200).length, 1, `racers swapping from one ETag: exactly one wins (${got.join(' ')})`)
      t.equal((await text(c, bucket, 'ref')).body, `swap ${got.indexOf(200)}`)
    })

    t.test('ranged GET', async t => {
      const bucket = await s3.bucket()
      const body = Buffer.from(Array.from({ length: 100_000 }, (_, i) => i % 251))
      await c.send(new PutObjectCommand({ Bucket: bucket, Key: 'pack', Body: body }))
      const r = await c.send(new GetObjectCommand({ Bucket: bucket, Key: 'pack', Range: 'bytes=4000-4999' }))
      t.equal(r.$metadata.httpStatusCode, 206)
      t.equal(r.ContentRange, 'bytes 4000-4999/100000')
      t.same(Buffer.from(await r.Body!.transformToByteArray()), body.subarray(4000, 5000))
      const tail = await c.send(new GetObjectCommand({ Bucket: bucket, Key: 'pack', Range: 'bytes=-10' }))
      t.same(Buffer.from(await tail.Body!.transformToByteArray()), body.subarray(-10), 'a suffix range: the last bytes')
    })

    t.test('DeleteObjects in one batch, a missing key included', async t => {
      const bucket = await s3.bucket()
      const keys = Array.from({ length: 30 }, (_, i) => `d/${i}`)
      await Promise.all(keys.map(Key => c.send(new PutObjectCommand({ Bucket: bucket, Key, Body: Key }))))
      const r = await c.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: [...keys, 'd/missing'].map(Key => ({ Key })), Quiet: true } }))
      t.same(r.Errors ?? [], [], 'no errors, not even for the missing key')
      const left = await c.send(new ListObjectsV2Command({ Bucket: bucket }))
      t.same(left.Contents ?? [], [], 'the bucket is empty')
    })

    t.test('a killed gateway refuses connections, and started again has the data', async t => {
      const bucket = await s3.bucket()
      await c.send(new PutObjectCommand({ Bucket: bucket, Key: 'before', Body: 'kept' }))
      await s3.killGateway()
      // One attempt: the SDK would otherwise retry the refused connection with backoff.
      const once = new S3Client({ endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, maxAttempts: 1, credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey } })
      t.teardown(() => once.destroy())
      const down = await Promise.allSettled([once.send(new GetObjectCommand({ Bucket: bucket, Key: 'before' }))])
      t.equal(down[0].status, 'rejected')
      t.match((down[0] as PromiseRejectedResult).reason, { code: 'ECONNREFUSED' }, 'connection refused while radosgw is down')
      await s3.startGateway()
      t.equal((await text(once, bucket, 'before')).body, 'kept', 'what was written before the kill is there')
      await once.send(new PutObjectCommand({ Bucket: bucket, Key: 'after', Body: 'new' }))
      t.equal((await text(c, bucket, 'after')).body, 'new', 'and writes work again')
    })

    t.test('a second server runs beside the first, on its own port, with its own buckets', async t => {
      const other = await s3Server(t)
      t.not(other.endpoint, s3.endpoint)
      const bucket = await other.bucket()
      const oc = other.client()
      t.teardown(() => oc.destroy())
      await oc.send(new PutObjectCommand({ Bucket: bucket, Key: 'k', Body: 'other' }))
      const seen = await outcomes([c.send(new GetObjectCommand({ Bucket: bucket, Key: 'k' }))])
      t.same(seen, [404], 'the first server has no such bucket')
    })
  })
}
