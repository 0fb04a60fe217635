import assert from 'node:assert/strict'
import request from 'supertest'
import { makeApp } from '../app.js'

describe('items service', () => {
  const app = makeApp()
  it('answers health', async () => {
    const r = await request(app).get('/health').expect(200)
    assert.deepEqual(r.body, { ok: true })
  })
  it('creates, reads and deletes items', async () => {
    for (let i = 0; i < 50; i++) {
      const c = await request(app).post('/items').send({ name: `n${i}`, qty: i }).expect(201)
      const g = await request(app).get(`/items/${c.body.id}`).expect(200)
      assert.equal(g.body.qty, i)
      await request(app).delete(`/items/${c.body.id}`).expect(204)
      await request(app).get(`/items/${c.body.id}`).expect(404)
    }
  })
  it('rejects invalid items', async () => {
    const r = await request(app).post('/items').send({ name: '', qty: -1 }).expect(400)
    assert.equal(r.body.error.length, 2)
  })
  it('diffs', async () => {
    const r = await request(app).post('/diff').send({ a: 'x\ny\n', b: 'x\nz\n' }).expect(200)
    assert.match(r.text, /-y\n\+z/)
  })
  it('round-trips msgpack', async () => {
    const body = { a: [1, 2, 3], b: { c: 'd' } }
    const r = await request(app).post('/pack').send(body).expect(200)
    assert.deepEqual(r.body, body)
  })
})
