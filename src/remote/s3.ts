// The one place cpfs talks to S3-compatible storage (AWS S3, R2, MinIO, Ceph's radosgw).
// Credentials and region come from the standard AWS environment and config files (the SDK's
// default chain); an endpoint other than AWS's is given per remote (`--endpoint`) or by
// AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, and then addressed path-style, which every
// S3-compatible server serves. Failures become CpfsErrors with stable codes here, so the rest
// of src/remote never sees an SDK error.
import { DeleteObjectsCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { CpfsError } from '../errors.js'

export interface S3Location {
  bucket: string
  /** Key prefix without a trailing slash ('' for the bucket's top). */
  prefix: string
  endpoint?: string
  /** The AWS variables to use instead of this process's (awsEnvironment of the process that asked). */
  env?: Record<string, string>
}

/**
 * The AWS variables of the process that asked (the CLI's), for a push or pull the mount's
 * daemon runs: it was started earlier, perhaps with other ones. The control socket is private
 * to the user (0600 in a 0700 directory), like the credentials files.
 */
export const AWS_VARIABLES = ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_REGION', 'AWS_DEFAULT_REGION', 'AWS_PROFILE', 'AWS_CONFIG_FILE', 'AWS_SHARED_CREDENTIALS_FILE', 'AWS_ENDPOINT_URL', 'AWS_ENDPOINT_URL_S3']

export function awsEnvironment (): Record<string, string> {
  const out: Record<string, string> = {}
  for (const k of AWS_VARIABLES) if (process.env[k] !== undefined) out[k] = process.env[k]!
  return out
}

export interface Listed {
  key: string
  size: number
  modified: number
}

/** Parse s3://BUCKET[/PREFIX]. */
export function parseS3Url (url: string): { bucket: string, prefix: string } {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(\/.*)?$/.exec(url)
  if (!m) throw new CpfsError('REMOTE_URL', `${url} is not an S3 URL`, 'write it as s3://BUCKET/PREFIX')
  const prefix = (m[2] ?? '').replace(/^\/+|\/+$/g, '')
  if (prefix.split('/').some(part => part === '.' || part === '..')) throw new CpfsError('REMOTE_URL', `${url} has . or .. in its prefix`, 'write it as s3://BUCKET/PREFIX')
  return { bucket: m[1], prefix }
}

/** The endpoint a remote uses: its own, else the environment's (AWS's when neither). */
export function endpointOf (own?: string, env: Record<string, string | undefined> = process.env): string | undefined {
  return own ?? env.AWS_ENDPOINT_URL_S3 ?? env.AWS_ENDPOINT_URL ?? undefined
}

// The SDK warns once per process that its releases after early 2027 need Node 22: cpfs pins a
// release that supports Node 20 (package.json), so the warning would only be noise on stderr.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true'

export class Bucket {
  readonly loc: S3Location
  private readonly client: S3Client
  /** Requests sent, by kind: what a push or pull cost (bench and --json report them). */
  readonly counts = { put: 0, get: 0, list: 0, head: 0, delete: 0, bytesUp: 0, bytesDown: 0 }

  constructor (loc: S3Location) {
    this.loc = loc
    const env = loc.env ?? process.env
    const endpoint = endpointOf(loc.endpoint, env)
    this.client = new S3Client({
      endpoint,
      forcePathStyle: endpoint !== undefined,
      region: env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1',
      ...(loc.env?.AWS_ACCESS_KEY_ID !== undefined && loc.env.AWS_SECRET_ACCESS_KEY !== undefined
        ? { credentials: { accessKeyId: loc.env.AWS_ACCESS_KEY_ID, secretAccessKey: loc.env.AWS_SECRET_ACCESS_KEY, ...(loc.env.AWS_SESSION_TOKEN !== undefined ? { sessionToken: loc.env.AWS_SESSION_TOKEN } : {}) } }
        : {}),
      // The SDK retries throttling and 5xx itself; a refused connection is retried too, then
      // reported (REMOTE_UNREACHABLE).
      maxAttempts: 4
    })
  }

  /** The key of `name` under the remote's prefix. */
  key (name: string): string {
    return this.loc.prefix === '' ? name : `${this.loc.prefix}/${name}`
  }

  where (name = ''): string {
    return `s3://${this.loc.bucket}/${this.key(name)}`
  }

  /** The object's bytes and ETag, or null when there is none. */
  async get (name: string): Promise<{ body: Buffer, etag: string } | null> {
    this.counts.get++
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.loc.bucket, Key: this.key(name) }))
      const body = Buffer.from(await r.Body!.transformToByteArray())
      this.counts.bytesDown += body.length
      return { body, etag: unquote(r.ETag ?? '') }
    } catch (err) {
      if (status(err) === 404 && code(err) !== 'NoSuchBucket') return null
      throw this.failure(err, 'read', name)
    }
  }

  /** Bytes [start, end) of the object. */
  async getRange (name: string, start: number, end: number): Promise<Buffer> {
    this.counts.get++
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.loc.bucket, Key: this.key(name), Range: `bytes=${start}-${end - 1}` }))
      const body = Buffer.from(await r.Body!.transformToByteArray())
      this.counts.bytesDown += body.length
      return body
    } catch (err) {
      if (status(err) === 404 && code(err) !== 'NoSuchBucket') throw new CpfsError('REMOTE_MISSING', `${this.where(name)} is missing`, 'nothing was changed here; push again from a machine that has this history')
      throw this.failure(err, 'read', name)
    }
  }

  async exists (name: string): Promise<boolean> {
    this.counts.head++
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.loc.bucket, Key: this.key(name) }))
      return true
    } catch (err) {
      if (status(err) === 404 && code(err) !== 'NoSuchBucket') return false
      throw this.failure(err, 'read', name)
    }
  }

  /** Write an immutable object (content-addressed: writing it twice writes the same bytes). */
  async put (name: string, body: Buffer): Promise<void> {
    this.counts.put++
    this.counts.bytesUp += body.length
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.loc.bucket, Key: this.key(name), Body: body }))
    } catch (err) {
      throw this.failure(err, 'write', name)
    }
  }

  /**
   * Compare-and-swap: write `name` only if it still has ETag `etag` (null: only if it does not
   * exist). False when another writer got there first: 412 (Ceph, and AWS for a mismatch),
   * 409 (AWS, for concurrent conditional writes) or 404 (AWS, If-Match on a missing key) all
   * mean "lost the race, read again". Ceph wants the ETag without quotes.
   */
  async swap (name: string, body: Buffer, etag: string | null): Promise<boolean> {
    this.counts.put++
    this.counts.bytesUp += body.length
    try {
      await this.client.send(new PutObjectCommand({
        Bucket: this.loc.bucket,
        Key: this.key(name),
        Body: body,
        ...(etag === null ? { IfNoneMatch: '*' } : { IfMatch: etag })
      }))
      return true
    } catch (err) {
      const s = status(err)
      if (s === 412 || s === 409 || (s === 404 && etag !== null && code(err) !== 'NoSuchBucket')) return false
      throw this.failure(err, 'write', name)
    }
  }

  /** Every object under `dir` (a name prefix under the remote's prefix), all pages. */
  async list (dir: string): Promise<Listed[]> {
    const out: Listed[] = []
    const prefix = this.key(dir)
    let token: string | undefined
    do {
      this.counts.list++
      try {
        const r = await this.client.send(new ListObjectsV2Command({ Bucket: this.loc.bucket, Prefix: prefix, ContinuationToken: token }))
        for (const o of r.Contents ?? []) {
          out.push({ key: o.Key!.slice(this.key('').length), size: o.Size ?? 0, modified: o.LastModified?.getTime() ?? 0 })
        }
        token = r.IsTruncated === true ? r.NextContinuationToken : undefined
      } catch (err) {
        throw this.failure(err, 'list', dir)
      }
    } while (token !== undefined)
    return out
  }

  /** Delete objects (batches of 1,000, the API's limit). */
  async remove (names: string[]): Promise<void> {
    for (let i = 0; i < names.length; i += 1000) {
      this.counts.delete++
      const part = names.slice(i, i + 1000)
      try {
        const r = await this.client.send(new DeleteObjectsCommand({ Bucket: this.loc.bucket, Delete: { Objects: part.map(n => ({ Key: this.key(n) })), Quiet: true } }))
        const failed = (r.Errors ?? []).filter(e => e.Code !== 'NoSuchKey')
        if (failed.length) throw new CpfsError('REMOTE_FAILED', `${this.where()} refused to delete ${failed.length} objects (${failed[0].Code}: ${failed[0].Message})`, 'check the credentials\' permissions')
      } catch (err) {
        if (err instanceof CpfsError) throw err
        throw this.failure(err, 'delete', part[0])
      }
    }
  }

  destroy (): void {
    this.client.destroy()
  }

  private failure (err: unknown, what: string, name: string): CpfsError {
    const s = status(err)
    const c = code(err)
    const where = this.where(name)
    const msg = String((err as Error)?.message ?? err).split('\n')[0]
    if (c === 'NoSuchBucket') return new CpfsError('REMOTE_NO_BUCKET', `bucket ${this.loc.bucket} does not exist at ${this.endpointName()}`, `create it, or fix the remote's URL (cpfs remote ls)`)
    if (s === 403 || c === 'AccessDenied' || c === 'InvalidAccessKeyId' || c === 'SignatureDoesNotMatch') {
      return new CpfsError('REMOTE_DENIED', `${this.endpointName()} refused to ${what} ${where} (${c ?? s})`, 'check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the AWS config files, and the bucket\'s policy')
    }
    if (s === undefined || /ECONNREFUSED|ENOTFOUND|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|socket hang up/i.test(msg) || (err as any)?.name === 'CredentialsProviderError') {
      if ((err as any)?.name === 'CredentialsProviderError') return new CpfsError('REMOTE_DENIED', `no AWS credentials for ${this.endpointName()}`, 'set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE')
      return new CpfsError('REMOTE_UNREACHABLE', `cannot ${what} ${where}: ${msg}`, `check that ${this.endpointName()} is up and reachable, then run the command again`)
    }
    return new CpfsError('REMOTE_FAILED', `cannot ${what} ${where}: ${c ?? s}: ${msg}`, 'run the command again; if it keeps failing, check the server\'s logs')
  }

  private endpointName (): string {
    return endpointOf(this.loc.endpoint, this.loc.env ?? process.env) ?? 'AWS S3'
  }
}

function status (err: unknown): number | undefined {
  return (err as any)?.$metadata?.httpStatusCode
}

function code (err: unknown): string | undefined {
  return (err as any)?.Code ?? (err as any)?.name
}

function unquote (etag: string): string {
  return etag.replace(/^"|"$/g, '')
}
