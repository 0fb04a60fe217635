// cpfs push / clone / remote against a real S3 server (Ceph's radosgw, started by
// scripts/s3-server.sh for this file): a history pushed from a mount and cloned elsewhere is
// the same at every turn, byte for byte; identical files are stored once across workspaces;
// and the faults a fleet meets — a racing pusher, a remote that moved on, a damaged or
// missing object, a server that is down or killed mid-push — cost no data and leave a ref
// that still names a complete history.
import t, { type Test } from 'tap'
import * as fs from 'node:fs'
import { join } from 'node:path'
import { ListObjectsV2Command, PutObjectCommand, GetObjectCommand, DeleteObjectCommand } from '@aws-sdk/client-s3'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { CLI, fuseAvailable, manifest, workspace, type Env } from './helpers.js'
import { s3Available, s3Server, type S3Server } from './s3-server.js'

const TREE = 'mkdir -p src/lib && echo one > src/a && echo lib > src/lib/l && ln -s src/a link && chmod 750 src && head -c 300000 /dev/urandom > blob && seq 1 20000 > numbers.txt'

function awsEnv (s: S3Server): NodeJS.ProcessEnv {
  return { ...s.env, AWS_ENDPOINT_URL: s.endpoint }
}

async function keys (s: S3Server, bucket: string, prefix: string): Promise<string[]> {
  const out: string[] = []
  let token: string | undefined
  do {
    const r = await s.client().send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }))
    for (const o of r.Contents ?? []) out.push(o.Key!)
    token = r.IsTruncated ? r.NextContinuationToken : undefined
  } while (token)
  return out
}

/** A mounted workspace with three turns of real tools' work; returns the manifest at the start of each turn and at the end. */
function history (w: Env): Array<Record<string, unknown>> {
  const at: Array<Record<string, unknown>> = [manifest(w.ws)]
  w.ok('mount', w.ws)
  w.run('echo two > src/a && sed -i s/1/one/ numbers.txt && mv src/lib src/moved && echo new > new.txt')
  w.ok('turn', w.ws, '-m', 'first')
  at.push(manifest(w.ws))
  w.run('rm -rf src && printf X >> blob && mkdir -p gen && for i in $(seq 1 50); do echo $i > gen/f$i; done')
  w.ok('turn', w.ws, '-m', 'second')
  at.push(manifest(w.ws))
  w.run('tar -cf pack.tar gen && echo head-work > head.txt')
  at.push(manifest(w.ws))
  return at
}

/** A workspace of TREE, mounted once, pushed to s3://BUCKET/PREFIX as ws. */
function pushedWorkspace (t: Test, env: NodeJS.ProcessEnv, bucket: string, prefix: string): Env {
  const w = workspace(t, TREE, { env })
  w.ok('mount', w.ws)
  w.ok('unmount', w.ws)
  w.ok('remote', 'add', 'origin', `s3://${bucket}/${prefix}`, '--dir', w.ws)
  w.ok('push', w.ws)
  return w
}

if (fuseAvailable(t) && s3Available(t)) {
  t.test('with a real S3 server', async t => {
    const s3 = await s3Server(t)
    const env = awsEnv(s3)

    t.test('push from a mount, clone elsewhere: every turn is the same, byte for byte', async t => {
      const bucket = await s3.bucket()
      const w = workspace(t, TREE, { env })
      const at = history(w)
      t.match(w.ok('remote', 'add', 'origin', `s3://${bucket}/team`, '--dir', w.ws), /remote origin: s3:\/\/.*team, this workspace as ws/)
      const pushed = JSON.parse(w.ok('push', 'origin', w.ws, '--json'))
      t.equal(pushed.turns, 3)
      t.equal(pushed.upToDate, false)
      t.ok(pushed.chunks > 0 && pushed.storedBytes < pushed.bytes, 'chunks are sent compressed')
      t.equal(JSON.parse(w.ok('push', w.ws, '--json')).upToDate, true, 'a second push with nothing new sends nothing')
      const objects = await keys(s3, bucket, 'team/')
      t.ok(objects.some(k => /^team\/packs\/[0-9a-f]{64}\.pack$/.test(k)), 'packs are named by their hash')
      t.ok(objects.includes('team/workspaces/ws/ref'))

      const ls = JSON.parse(w.ok('remote', 'ls', 'origin', '--dir', w.ws, '--json'))
      t.equal(ls.length, 1)
      t.equal(ls[0].name, 'ws')
      t.equal(ls[0].turns, 3)

      const dest = join(w.home, '..', 'clone')
      const out = w.ok('clone', `s3://${bucket}/team/ws`, dest)
      t.match(out, /cloned .* into .*clone: 3 turns, .* paths verified; remote origin added/)
      t.same(manifest(dest), at[3], 'the clone holds the head view')
      const srcLog = JSON.parse(w.ok('log', w.ws, '--json')).map((x: any) => x.message ?? null)
      const cloneLog = JSON.parse(w.ok('log', dest, '--json')).map((x: any) => x.message ?? null)
      t.same(cloneLog.slice(0, srcLog.length), srcLog, 'with the same turns')
      t.equal(cloneLog.length, srcLog.length + 1, 'and a new head on the pushed head turn, which held something (sealed, as an unmount does)')
      // Rewound offline and mounted, the clone is every turn of the source.
      w.ok('rewind', '2', dest)
      t.same(manifest(dest), at[1], 'the clone rewound to turn 2 offline')
      w.ok('mount', dest)
      w.ok('rewind', '1', dest)
      t.same(manifest(dest), at[0], 'the clone rewound to turn 1 in a mount: the root tree')
      w.ok('redo', dest)
      t.same(manifest(dest), at[1], 'and redone')
      w.ok('unmount', dest)
      t.same(manifest(dest), at[1])
      t.match(w.ok('fsck', dest), /no problems|clean|ok/i, 'the clone\'s store checks')

      // The clone pushes on: its history continues the same lineage.
      w.ok('mount', dest)
      w.run('echo from-the-clone > clone.txt', dest)
      w.ok('turn', dest, '-m', 'clone work')
      const again = JSON.parse(w.ok('push', dest, '--json'))
      t.equal(again.upToDate, false)
      t.ok(again.trees >= 1, 'the clone\'s new turns were sent')
      w.ok('unmount', dest)
      // …and the source, which did not pull it, is told so.
      const refused = w.cpfs('push', w.ws)
      t.equal(refused.code, 1)
      t.match(refused.stderr, /^cpfs: .* has \d+ turns?(?: or branch layers?)? this workspace does not .*\(run cpfs pull origin first/m)
      // The source has head work of its own: the clone's turns arrive as a branch, merged in.
      const pulled = JSON.parse(w.ok('pull', w.ws, '--json'))
      t.equal(pulled.fastForward, false)
      t.match(pulled.branch, /^b\d+$/)
      t.same(manifest(w.ws), at[3], 'a pull moves nothing when the workspace has work of its own')
      t.match(w.ok('log', w.ws, '--all'), /pulled from s3:\/\//)
      w.ok('merge', pulled.branch, w.ws)
      t.equal(fs.readFileSync(join(w.ws, 'clone.txt'), 'utf8'), 'from-the-clone\n', 'merged: the clone\'s work is in the head')
      t.equal(fs.readFileSync(join(w.ws, 'head.txt'), 'utf8'), 'head-work\n', 'and the source\'s own')
      w.ok('push', w.ws)
      t.equal(JSON.parse(w.ok('pull', w.ws, '--json')).branch, null, 'then both are up to date')
      w.ok('unmount', w.ws)
    })

    t.test('pull fast-forwards a workspace with nothing of its own, mounted or not', async t => {
      const bucket = await s3.bucket()
      const w = pushedWorkspace(t, env, bucket, 'ff')
      const dest = join(w.home, '..', 'laptop')
      w.ok('clone', `s3://${bucket}/ff/ws`, dest)
      w.ok('mount', dest)
      w.run('echo laptop > laptop.txt && rm -rf src', dest)
      w.ok('turn', dest, '-m', 'on the laptop')
      w.run('echo more > more.txt', dest)
      w.ok('push', dest)
      const want = manifest(dest)
      const r = JSON.parse(w.ok('pull', w.ws, '--json'))
      t.equal(r.fastForward, true)
      t.equal(r.moved.mounted, false)
      t.same(manifest(w.ws), want, 'not mounted: the real directory moved to the pulled head, verified')
      const log = JSON.parse(w.ok('log', w.ws, '--json'))
      t.equal(log[0].message, 'on the laptop', 'with the pulled turns (the tip sealed, a new head opened on it)')
      t.equal(JSON.parse(w.ok('status', w.ws, '--json')).branches, 0, 'and no branch left over')
      // Mounted: the laptop goes on, the source pulls in its mount.
      w.run('echo again > again.txt', dest)
      w.ok('turn', dest)
      w.ok('push', dest)
      w.ok('mount', w.ws)
      const m = JSON.parse(w.ok('pull', w.ws, '--json'))
      t.equal(m.fastForward, true)
      t.equal(m.moved.mounted, true)
      t.same(manifest(w.ws), manifest(dest), 'mounted: the view is the pulled head')
      w.ok('unmount', w.ws)
      w.ok('unmount', dest)
    })

    t.test('the MCP tools push and pull', async t => {
      const bucket = await s3.bucket()
      const w = workspace(t, 'echo a > a.txt', { env })
      w.ok('mount', w.ws)
      w.ok('remote', 'add', 'origin', `s3://${bucket}/mcp`, '--dir', w.ws)
      w.run('echo agent > agent.txt')
      const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', w.ws], env: w.env as Record<string, string>, stderr: 'pipe' })
      const client = new Client({ name: 'cpfs-test', version: '1.0.0' })
      await client.connect(transport)
      t.teardown(() => client.close())
      const call = async (name: string): Promise<any> => JSON.parse(((await client.callTool({ name, arguments: {} })) as any).content[0].text)
      const pushed = await call('push')
      t.equal(pushed.upToDate, false)
      t.match(pushed.url, /\/mcp\/workspaces\/ws$/)
      const dest = join(w.home, '..', 'other')
      w.ok('clone', `s3://${bucket}/mcp/ws`, dest)
      t.equal(fs.readFileSync(join(dest, 'agent.txt'), 'utf8'), 'agent\n', 'what the agent pushed, cloned elsewhere')
      w.ok('mount', dest)
      w.run('echo elsewhere > elsewhere.txt', dest)
      w.ok('turn', dest)
      w.ok('push', dest)
      w.ok('unmount', dest)
      const pulled = await call('pull')
      t.match(pulled.branch, /^b\d+$/)
      t.equal(pulled.fastForward, true, 'the agent\'s head holds nothing it had not pushed: the other machine went on from it')
      t.equal(fs.readFileSync(join(w.ws, 'elsewhere.txt'), 'utf8'), 'elsewhere\n', 'the mount shows the pulled head')
      await client.close()
      w.ok('unmount', w.ws)
    })

    t.test('a second workspace of the same tree uploads only what differs', async t => {
      const bucket = await s3.bucket()
      const big = 'for i in $(seq 1 40); do head -c 100000 /dev/urandom > f$i; done'
      const a = workspace(t, big, { env })
      a.ok('mount', a.ws)
      a.ok('unmount', a.ws)
      a.ok('remote', 'add', 'origin', `s3://${bucket}/p`, '--as', 'first', '--dir', a.ws)
      const first = JSON.parse(a.ok('push', a.ws, '--json'))
      const b = workspace(t, '', { env })
      b.run(`cp -a ${a.ws}/. ${b.ws}/ && printf X >> f7`)
      b.ok('mount', b.ws)
      b.ok('unmount', b.ws)
      b.ok('remote', 'add', 'origin', `s3://${bucket}/p`, '--as', 'second', '--dir', b.ws)
      const second = JSON.parse(b.ok('push', b.ws, '--json'))
      t.ok(second.bytes <= first.bytes * 0.05, `the second workspace sent ${second.bytes} B of ${first.bytes} B`)
      const dest = join(b.home, '..', 'c2')
      b.ok('clone', `s3://${bucket}/p/second`, dest)
      t.same(manifest(dest), manifest(b.ws), 'and clones byte-exact')
      // A turn's push: its pack, the index, the sealed turn's tree and the new head's, the ref.
      a.ok('mount', a.ws)
      a.run('for i in 1 2 3; do echo turn-$i > t$i.txt; done && printf Y >> f9')
      a.ok('turn', a.ws)
      const turn = JSON.parse(a.ok('push', a.ws, '--json'))
      t.same({ put: turn.requests.put, trees: turn.trees, chunks: turn.chunks }, { put: 5, trees: 2, chunks: 4 }, 'a turn costs 5 PUTs: 1 pack, 1 index, 2 trees, the ref (the root tree is not sent again)')
      a.ok('unmount', a.ws)
    })

    t.test('remote gc deletes only what no ref reaches, a grace period after marking it', async t => {
      const bucket = await s3.bucket()
      const shared = 'for i in 1 2 3; do head -c 150000 /dev/urandom > shared$i; done'
      const b = workspace(t, shared + ' && echo b > only-b', { env })
      b.ok('mount', b.ws)
      b.ok('unmount', b.ws)
      b.ok('remote', 'add', 'origin', `s3://${bucket}/gc`, '--as', 'b', '--dir', b.ws)
      b.ok('push', b.ws)
      const packsOfB = await keys(s3, bucket, 'gc/packs/')
      const a = workspace(t, '', { env })
      a.run(`cp -a ${b.ws}/shared1 ${b.ws}/shared2 ${b.ws}/shared3 ${a.ws}/ && head -c 150000 /dev/urandom > only-a`)
      a.ok('mount', a.ws)
      a.ok('unmount', a.ws)
      a.ok('remote', 'add', 'origin', `s3://${bucket}/gc`, '--as', 'a', '--dir', a.ws)
      a.ok('push', a.ws)
      const packOfA = (await keys(s3, bucket, 'gc/packs/')).filter(k => !packsOfB.includes(k))
      t.equal(packOfA.length, 1, 'a sent one pack of its own (only-a; the shared files were there)')
      const gc = (...more: string[]): any => JSON.parse(a.ok('remote', 'gc', 'origin', '--dir', a.ws, '--json', ...more))
      const none = gc()
      t.same({ ...none, reachable: 0 }, { workspaces: 2, reachable: 0, deleted: 0, deletedBytes: 0, marked: 0, markedBytes: 0, dryRun: false }, 'everything is reachable: nothing marked or deleted')
      // Workspace a goes away: its ref is deleted. What only it reached is garbage now.
      await s3.client().send(new DeleteObjectCommand({ Bucket: bucket, Key: 'gc/workspaces/a/ref' }))
      const all = await keys(s3, bucket, 'gc/')
      const dry = gc('--grace', '0', '--dry-run')
      t.equal(dry.deleted, 0)
      t.equal(dry.marked, 4, 'a dry run would mark a\'s pack, its index, its root tree and its layer')
      t.same(await keys(s3, bucket, 'gc/'), all, 'and changes nothing')
      t.equal(gc().marked, 0, 'with the default grace (24 hours) nothing that young is marked')
      const first = gc('--grace', '0')
      t.same([first.deleted, first.marked], [0, 4], 'the first run only marks')
      // A push during the grace period builds on none of the marked objects: workspace c has
      // only-a's bytes, and sends them again rather than reuse the marked pack.
      const c = workspace(t, '', { env })
      c.run(`cp -a ${a.ws}/only-a ${c.ws}/`)
      c.ok('mount', c.ws)
      c.ok('unmount', c.ws)
      c.ok('remote', 'add', 'origin', `s3://${bucket}/gc`, '--as', 'c', '--dir', c.ws)
      const pushed = JSON.parse(c.ok('push', c.ws, '--json'))
      t.equal(pushed.bytes, 150000 + 0, 'the marked bytes were sent again')
      const second = gc('--grace', '0')
      t.equal(second.deleted, 4, 'the second run deletes what the first marked')
      const left = await keys(s3, bucket, 'gc/packs/')
      t.notOk(left.includes(packOfA[0]), 'a\'s pack is gone')
      t.ok(packsOfB.every(k => left.includes(k)), 'b\'s packs (which a shared) are kept')
      for (const [w, name] of [[b, 'b'], [c, 'c']] as Array<[Env, string]>) {
        const dest = join(w.home, '..', `after-gc-${name}`)
        w.ok('clone', `s3://${bucket}/gc/${name}`, dest)
        t.same(manifest(dest), manifest(w.ws), `${name} clones byte-exact after the gc`)
      }
      t.same([gc('--grace', '0').deleted, gc('--grace', '0').marked], [0, 0], 'a third run finds nothing left')
    })

    t.test('racing pushers: one wins, the other is told to pull', async t => {
      const bucket = await s3.bucket()
      const a = workspace(t, 'echo a > a', { env })
      a.ok('mount', a.ws)
      a.ok('unmount', a.ws)
      a.ok('remote', 'add', 'origin', `s3://${bucket}/r`, '--as', 'shared', '--dir', a.ws)
      a.ok('push', a.ws)
      const c1 = join(a.home, '..', 'c1')
      const c2 = join(a.home, '..', 'c2')
      a.ok('clone', `s3://${bucket}/r/shared`, c1)
      a.ok('clone', `s3://${bucket}/r/shared`, c2)
      for (const [i, d] of [c1, c2].entries()) {
        a.ok('mount', d)
        a.run(`echo ${i} > work${i}`, d)
        a.ok('turn', d)
      }
      const [r1, r2] = await Promise.all([a.cpfsAsync('push', c1), a.cpfsAsync('push', c2)])
      t.equal([r1, r2].filter(r => r.code === 0).length, 1, 'exactly one push lands')
      const lost = r1.code === 0 ? r2 : r1
      t.match(lost.stderr, /^cpfs: (another push to .* landed while this one ran|.* has \d+ turns?(?: or branch layers?)? this workspace does not).*cpfs pull origin/m)
      const winner = r1.code === 0 ? c1 : c2
      const dest = join(a.home, '..', 'after-race')
      a.ok('clone', `s3://${bucket}/r/shared`, dest)
      t.same(manifest(dest), manifest(winner), 'the ref names the winner\'s complete history')
      a.ok('unmount', c1)
      a.ok('unmount', c2)
    })

    t.test('a damaged or missing object is found before anything is written', async t => {
      const bucket = await s3.bucket()
      const w = pushedWorkspace(t, env, bucket, 'd')
      const packs = (await keys(s3, bucket, 'd/packs/'))
      t.ok(packs.length >= 1)
      const client = s3.client()
      const original = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: packs[0] }))).Body!.transformToByteArray())
      const bad = Buffer.from(original)
      bad[bad.length - 10] ^= 0xff
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: packs[0], Body: bad }))
      const dest = join(w.home, '..', 'bad')
      // --full reads whole packs: damage anywhere in one (here a record header) is found.
      const r = w.cpfs('clone', `s3://${bucket}/d/ws`, dest, '--full')
      t.equal(r.code, 1)
      t.match(r.stderr, /^cpfs: pack [0-9a-f]{64} on the remote is damaged: .*\(nothing was changed here/m)
      t.notOk(fs.existsSync(dest), 'no clone is left behind')
      // A lazy clone reads only the chunks it needs, each checked against its hash: damage in
      // one of them (the middle of the pack is the random blob's data) stops it the same way.
      const bad2 = Buffer.from(original)
      bad2[Math.floor(bad2.length / 2)] ^= 0xff
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: packs[0], Body: bad2 }))
      const lazy = w.cpfs('clone', `s3://${bucket}/d/ws`, dest)
      t.equal(lazy.code, 1)
      t.match(lazy.stderr, /^cpfs: pack [0-9a-f]{64} on the remote is damaged: chunk [0-9a-f]{64} does not (match its SHA-256|decompress) \(nothing was changed here/m)
      t.notOk(fs.existsSync(dest), 'no lazy clone is left behind')
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: packs[0] }))
      const m = w.cpfs('clone', `s3://${bucket}/d/ws`, dest, '--full')
      t.equal(m.code, 1)
      t.match(m.stderr, /^cpfs: pack [0-9a-f]{64} is missing from s3:\/\//m)
      t.notOk(fs.existsSync(dest))
      // Lazy, the chunks' places come from the packs the remote lists: the missing ones have none.
      const ml = w.cpfs('clone', `s3://${bucket}/d/ws`, dest)
      t.equal(ml.code, 1)
      t.match(ml.stderr, /^cpfs: \d+ chunks? of this history (is|are) in no pack the remote holds \([0-9a-f]{64}…\) \(nothing was changed here/m)
      t.notOk(fs.existsSync(dest))
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: packs[0], Body: original }))
      w.ok('clone', `s3://${bucket}/d/ws`, dest)
      t.same(manifest(dest), manifest(w.ws), 'with the pack back, the clone works')
      // A pull meets a damaged pack: the pulling workspace and its history are unchanged.
      w.ok('mount', dest)
      w.run('head -c 200000 /dev/urandom > fresh.bin', dest)
      w.ok('turn', dest)
      w.ok('push', dest)
      w.ok('unmount', dest)
      const fresh = (await keys(s3, bucket, 'd/packs/')).filter(k => !packs.includes(k))
      t.equal(fresh.length, 1, 'the clone\'s push sent one new pack')
      const good = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: fresh[0] }))).Body!.transformToByteArray())
      const flipped = Buffer.from(good)
      flipped[flipped.length - 100] ^= 0x01
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: fresh[0], Body: flipped }))
      const before = { tree: manifest(w.ws), log: w.ok('log', w.ws, '--all', '--json') }
      const p = w.cpfs('pull', w.ws)
      t.equal(p.code, 1)
      t.match(p.stderr, /^cpfs: pack [0-9a-f]{64} on the remote is damaged: chunk [0-9a-f]{64} does not (match its SHA-256|decompress) \(nothing was changed here/m)
      t.same({ tree: manifest(w.ws), log: w.ok('log', w.ws, '--all', '--json') }, before, 'the workspace and its history are as they were')
      t.match(w.ok('fsck', w.ws), /clean/, 'and its store checks')
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: fresh[0], Body: good }))
      const ok = JSON.parse(w.ok('pull', w.ws, '--json'))
      t.equal(ok.fastForward, true)
      t.same(manifest(w.ws), manifest(dest), 'with the pack repaired, the pull lands')
    })

    t.test('a hostile remote cannot make a clone or a pull write outside the workspace', async t => {
      const bucket = await s3.bucket()
      const w = workspace(t, 'echo a > a.txt', { env })
      w.ok('mount', w.ws)
      w.ok('unmount', w.ws)
      w.ok('remote', 'add', 'origin', `s3://${bucket}/evil`, '--dir', w.ws)
      w.ok('push', w.ws)
      // A turn whose record is at /../escaped, content-addressed and named right, and a ref
      // that points at it: everything checks but the path.
      const objects = await import('../dist/remote/objects.js')
      const codec = await import('../dist/store/codec.js')
      const client = s3.client()
      const refBody = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: 'evil/workspaces/ws/ref' }))).Body!.transformToByteArray())
      const ref = objects.decodeRef(refBody, 'ref')
      const now = Date.now()
      const entry = codec.encodeEntry({ kind: 'd', mode: 0o777, uid: 0, gid: 0, atime: now, mtime: now, ctime: now, ino: 2 ** 52 + 99 })
      const evil = objects.sealObject({ kind: 'layer', turn: codec.encode({ openedAt: now }), records: [['/../escaped', entry]] })
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: `evil/trees/${evil.hex}`, Body: evil.body }))
      const bad = { ...ref, stack: [...ref.stack, evil.hex] }
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'evil/workspaces/ws/ref', Body: objects.encodeRef(bad) }))
      const parent = join(w.home, '..')
      const before = fs.readdirSync(parent).sort()
      const r = w.cpfs('clone', `s3://${bucket}/evil/ws`, join(parent, 'victim'))
      t.equal(r.code, 1)
      t.match(r.stderr, /^cpfs: tree [0-9a-f]{64} on the remote is damaged: it holds a path that would leave the workspace \("\/\.\.\/escaped"\)/m)
      t.same(fs.readdirSync(parent).sort(), before, 'nothing was made beside it')
      const p = w.cpfs('pull', w.ws)
      t.equal(p.code, 1)
      t.match(p.stderr, /would leave the workspace/)
      t.equal(JSON.parse(w.ok('status', w.ws, '--json')).branches, 0, 'the pull added nothing to the history')
    })

    t.test('bad input: one line, non-zero, nothing changed', async t => {
      const bucket = await s3.bucket()
      const w = workspace(t, 'echo a > a', { env })
      w.ok('mount', w.ws)
      w.ok('unmount', w.ws)
      for (const [args, re] of [
        [['push', w.ws], /^cpfs: this workspace has no remote \(add one: cpfs remote add origin s3:\/\/BUCKET\/PREFIX\)$/m],
        [['remote', 'add', 'origin', 'http://x', '--dir', w.ws], /^cpfs: http:\/\/x is not an S3 URL \(write it as s3:\/\/BUCKET\/PREFIX\)$/m],
        [['remote', 'add', 'origin', `s3://${bucket}/p`, '--as', '../x', '--dir', w.ws], /cannot name a workspace on a remote/],
        [['clone', `s3://${bucket}/p/nothing`, join(w.home, '..', 'none')], /^cpfs: no workspace nothing at s3:\/\/.* \(cpfs remote ls s3:\/\/.* lists the workspaces there\)$/m],
        [['clone', `s3://no-such-bucket-cpfs/p/x`, join(w.home, '..', 'none')], /^cpfs: bucket no-such-bucket-cpfs does not exist/m]
      ] as Array<[string[], RegExp]>) {
        const r = w.cpfs(...args)
        t.equal(r.code, 1, args.join(' '))
        t.match(r.stderr, re)
      }
      t.notOk(fs.existsSync(join(w.home, '..', 'none')))
      w.ok('remote', 'add', 'origin', `s3://${bucket}/p`, '--dir', w.ws)
      t.match(w.cpfs('remote', 'add', 'origin', `s3://${bucket}/q`, '--dir', w.ws).stderr, /^cpfs: remote origin exists already/m)
      const other = workspace(t, 'echo b > b', { env })
      other.ok('mount', other.ws)
      other.ok('unmount', other.ws)
      other.ok('remote', 'add', 'origin', `s3://${bucket}/p`, '--as', 'ws', '--dir', other.ws)
      w.ok('push', w.ws)
      const r = other.cpfs('push', other.ws)
      t.equal(r.code, 1)
      t.match(r.stderr, /^cpfs: s3:\/\/.*\/workspaces\/ws\/ref holds another workspace's history .*--as NAME\)$/m)
    })

    t.test('the server killed mid-pull: the pulling workspace and its history are as they were', async t => {
      const bucket = await s3.bucket()
      const w = pushedWorkspace(t, env, bucket, 'mp')
      const other = join(w.home, '..', 'other')
      w.ok('clone', `s3://${bucket}/mp/ws`, other)
      w.ok('mount', other)
      w.run('for i in $(seq 1 60); do head -c 1000000 /dev/urandom > p$i; done', other)
      w.ok('turn', other, '-m', 'sixty files')
      w.ok('push', other)
      w.ok('unmount', other)
      const before = { tree: manifest(w.ws), log: w.ok('log', w.ws, '--all', '--json') }
      // Killed while the packs are on their way (or, on a fast day, after the pull ended).
      const pulling = w.cpfsAsync('pull', w.ws)
      await new Promise(resolve => setTimeout(resolve, 700))
      await s3.killGateway()
      const r = await pulling
      await s3.startGateway()
      if (r.code === 0) {
        t.same(manifest(w.ws), manifest(other), 'the pull finished before the kill: fast-forwarded')
      } else {
        t.match(r.stderr, /^cpfs: cannot read s3:\/\/.*\(check that http:\/\/127\.0\.0\.1:\d+ is up and reachable, then run the command again\)\n$/)
        t.same({ tree: manifest(w.ws), log: w.ok('log', w.ws, '--all', '--json') }, before, 'cut mid-pull: the workspace and its history are as they were')
      }
      t.match(w.ok('fsck', w.ws), /is clean/, 'the store checks')
      w.ok('pull', w.ws)
      t.same(manifest(w.ws), manifest(other), 'pulled again: fast-forwarded to the other machine\'s work')
    })

    t.test('a lazy clone fetches the head view, and an older turn when something reads it', async t => {
      const bucket = await s3.bucket()
      const w = workspace(t, 'head -c 2000000 /dev/urandom > big && echo a > a && mkdir d && echo kept > d/k', { env })
      // at[i]: the workspace at the start of turn i + 1 (at[3]: the head).
      const at = [manifest(w.ws)]
      w.ok('mount', w.ws)
      for (const n of [1, 2, 3]) {
        w.run(`head -c 2000000 /dev/urandom > big && echo ${n} > a`)
        w.ok('turn', w.ws, '-m', `turn ${n}`)
        at.push(manifest(w.ws))
      }
      w.ok('unmount', w.ws)
      w.ok('remote', 'add', 'origin', `s3://${bucket}/lazy`, '--dir', w.ws)
      w.ok('push', w.ws)

      const dest = join(w.home, '..', 'lazy')
      const r = JSON.parse(w.ok('clone', `s3://${bucket}/lazy/ws`, dest, '--json'))
      t.same(manifest(dest), at[3], 'the head view is written and verified')
      t.ok(r.bytes >= 2000000 && r.bytes < 2 * 2000000, `only the head view's data was fetched (${r.bytes} bytes of about 8 MB of history)`)
      t.ok(r.remoteChunks >= 3 * 30, `the older versions of big stay on the remote (${r.remoteChunks} chunks)`)
      t.match(w.ok('fsck', dest), /is clean/, 'a store with chunks on its remote checks clean')
      const store = fs.readdirSync(w.home).filter(n => n.startsWith('lazy-')).map(n => join(w.home, n, 'store'))
      t.equal(store.length, 1)
      const cache = join(store[0], 'remote-cache', 'chunks')
      // The log lists every turn without downloading them: files not fetched count without lines.
      const log = JSON.parse(w.ok('log', dest, '--json'))
      t.same(log.map((x: any) => x.message), ['turn 1', 'turn 2', 'turn 3', null], 'the log lists every turn')
      t.same(log.map((x: any) => x.files), [2, 2, 2, 0], 'with the paths each changed')
      t.notOk(fs.existsSync(cache), 'and fetched nothing')

      // The remote down: reading an older turn fails in one line and changes nothing.
      await s3.killGateway()
      const down = w.cpfs('rewind', '2', dest)
      await s3.startGateway()
      t.equal(down.code, 1)
      t.match(down.stderr, /^cpfs: cannot read s3:\/\/.*\/packs\/[0-9a-f]{64}\.pack: .*\(check that http:\/\/127\.0\.0\.1:\d+ is up and reachable, then run the command again\)\n$/)
      t.same(manifest(dest), at[3], 'nothing moved')
      t.equal(JSON.parse(w.ok('status', dest, '--json')).head, 4)

      // Up again: offline and in a mount, every turn is the source's, fetched as it is read.
      w.ok('rewind', '2', dest)
      t.same(manifest(dest), at[1], 'rewound offline to turn 2: its data fetched on demand')
      // The fetched chunks are kept in the store's cache: emptied, the mount must fetch again.
      t.ok(fs.readdirSync(cache).length > 0, 'the offline rewind kept what it fetched')
      fs.rmSync(cache, { recursive: true })
      w.ok('mount', dest)
      w.ok('rewind', '1', dest)
      t.same(manifest(dest), at[0], 'rewound in a mount to turn 1: read through the mount, fetched by its daemon')
      t.ok(fs.readdirSync(cache).length > 0, 'the daemon fetched them')
      w.ok('unmount', dest)
      // What was fetched once is kept: the remote is not needed for it again.
      await s3.killGateway()
      w.ok('redo', dest)
      t.same(manifest(dest), at[1], 'redone with the remote down')
      await s3.startGateway()
      t.match(w.ok('fsck', dest), /is clean/)

      // pull --full, mounted: the rest is fetched into the store; the remote is not needed again.
      w.ok('mount', dest)
      const filled = JSON.parse(w.ok('pull', dest, '--full', '--json'))
      t.ok(filled.filled.chunks > 0, `pull --full fetched what was left (${filled.filled.chunks} chunks)`)
      w.ok('unmount', dest)
      fs.rmSync(cache, { recursive: true, force: true })
      await s3.killGateway()
      w.ok('rewind', '1', dest)
      t.same(manifest(dest), at[0], 'rewound to turn 1 with the remote down and no cache')
      w.ok('redo', dest)
      t.same(manifest(dest), at[1], 'redone to turn 2')
      w.ok('redo', dest)
      t.same(manifest(dest), at[3], 'and to the head')
      await s3.startGateway()
      t.equal(JSON.parse(w.ok('pull', dest, '--full', '--json')).filled.chunks, 0, 'nothing is left to fetch')
      t.match(w.ok('fsck', dest), /is clean/)

      // --full: every turn's data now; the clone never needs the remote again.
      const full = join(w.home, '..', 'full')
      const f = JSON.parse(w.ok('clone', `s3://${bucket}/lazy/ws`, full, '--full', '--json'))
      t.equal(f.remoteChunks, 0)
      t.ok(f.bytes >= 4 * 2000000, 'every version of big was fetched')
      await s3.killGateway()
      w.ok('rewind', '1', full)
      t.same(manifest(full), at[0], 'a full clone rewinds with the remote down')
      await s3.startGateway()

      // The remote loses its packs after a lazy clone (a workspace deleted there, then gc):
      // reading what they held fails in one line and changes nothing.
      const late = join(w.home, '..', 'late')
      w.ok('clone', `s3://${bucket}/lazy/ws`, late)
      const client = s3.client()
      const packs = await keys(s3, bucket, 'lazy/packs/')
      const saved = await Promise.all(packs.map(async Key => Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key }))).Body!.transformToByteArray())))
      for (const Key of packs) await client.send(new DeleteObjectCommand({ Bucket: bucket, Key }))
      const gone = w.cpfs('rewind', '1', late)
      t.equal(gone.code, 1)
      t.match(gone.stderr, /^cpfs: pack [0-9a-f]{64} is missing from s3:\/\/.* \(nothing was changed here; push again from a machine that has this history\)\n$/)
      t.same(manifest(late), at[3], 'nothing moved')
      for (const [i, Key] of packs.entries()) await client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: saved[i] }))
      client.destroy()
      w.ok('rewind', '1', late)
      t.same(manifest(late), at[0], 'with the packs back, it reads')
      // A damaged copy in the cache is never used: the chunk is fetched again.
      const lateCache = fs.readdirSync(w.home).filter(n => n.startsWith('late-')).map(n => join(w.home, n, 'store', 'remote-cache', 'chunks'))[0]
      let flipped = 0
      for (const d of fs.readdirSync(lateCache)) {
        for (const f of fs.readdirSync(join(lateCache, d))) {
          const file = join(lateCache, d, f)
          const b = fs.readFileSync(file)
          b[0] ^= 0xff
          fs.writeFileSync(file, b)
          flipped++
        }
      }
      t.ok(flipped > 0, `${flipped} cached chunks damaged`)
      w.ok('redo', late)
      w.ok('rewind', '1', late)
      t.same(manifest(late), at[0], 'read again from the remote, byte-exact')
      t.match(w.ok('fsck', late), /is clean/)
    })

    t.test('the server down, or killed mid-push: the ref still names a complete history', async t => {
      const bucket = await s3.bucket()
      const w = workspace(t, TREE + ' && for i in $(seq 1 30); do head -c 1000000 /dev/urandom > r$i; done', { env })
      w.run('echo first > first')
      w.ok('mount', w.ws)
      w.ok('unmount', w.ws)
      w.ok('remote', 'add', 'origin', `s3://${bucket}/k`, '--dir', w.ws)
      w.ok('push', w.ws)
      const before = manifest(w.ws)
      w.ok('mount', w.ws)
      w.run('for i in $(seq 1 30); do head -c 1000000 /dev/urandom > s$i; done')
      w.ok('turn', w.ws)
      await s3.killGateway()
      const down = w.cpfs('push', w.ws)
      t.equal(down.code, 1)
      t.match(down.stderr, /^cpfs: cannot .* \(check that http:\/\/127\.0\.0\.1:\d+ is up and reachable, then run the command again\)$/m)
      await s3.startGateway()
      // Killed while its packs are on the way.
      const pushing = w.cpfsAsync('push', w.ws)
      await new Promise(resolve => setTimeout(resolve, 300))
      await s3.killGateway()
      const r = await pushing
      await s3.startGateway()
      const dest = join(w.home, '..', 'mid')
      w.ok('clone', `s3://${bucket}/k/ws`, dest)
      if (r.code === 0) t.same(manifest(dest), manifest(w.ws), 'the push finished before the kill: the new history')
      else t.same(manifest(dest), before, 'the push was cut: the ref still names the last complete push')
      w.ok('push', w.ws)
      const dest2 = join(w.home, '..', 'after')
      w.ok('clone', `s3://${bucket}/k/ws`, dest2)
      t.same(manifest(dest2), manifest(w.ws), 'pushed again, the remote has it all')
      w.ok('unmount', w.ws)
    })
  })
}
