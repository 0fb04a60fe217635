// A small express service: what the test suite exercises.
import express from 'express'
import { z } from 'zod'
import { createTwoFilesPatch } from 'diff'
import { pack, unpack } from 'msgpackr'

const Item = z.object({ name: z.string().min(1), qty: z.number().int().nonnegative() })

export function makeApp () {
  const app = express()
  const items = new Map()
  let next = 1
  app.use(express.json())
  app.get('/health', (req, res) => res.json({ ok: true }))
  app.post('/items', (req, res) => {
    const parsed = Item.safeParse(req.body)
    if (!parsed.success) return res.status(400).json({ error: parsed.error.issues.map(i => i.message) })
    const id = next++
    items.set(id, parsed.data)
    res.status(201).json({ id, ...parsed.data })
  })
  app.get('/items/:id', (req, res) => {
    const item = items.get(Number(req.params.id))
    if (!item) return res.status(404).json({ error: 'not found' })
    res.json({ id: Number(req.params.id), ...item })
  })
  app.delete('/items/:id', (req, res) => res.status(items.delete(Number(req.params.id)) ? 204 : 404).end())
  app.post('/diff', (req, res) => res.type('text/plain').send(createTwoFilesPatch('a', 'b', String(req.body.a), String(req.body.b))))
  app.post('/pack', (req, res) => res.json(unpack(pack(req.body))))
  app.use((err, req, res, next) => res.status(500).json({ error: String(err.message) }))
  return app
}
