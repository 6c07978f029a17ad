// Slow consumers against the harness-rs TanStack host over a real network (the host runs
// with --slow-consumer-ms SLOW): "If the client does not read for this long, the server
// sends slow_consumer and closes." and "A slow client loses no events."
//  1. SSE: a reader that stops reading while megabytes of events come gets the
//     slow_consumer error and the end of the stream when it reads again; it reconnects
//     with Last-Event-ID and has every event of the thread exactly once.
//  2. WebSocket: a reader that stops reading gets the close 4408 when it reads again; it
//     subscribes again with `from` and has every event exactly once.
// Usage: node slow.mjs BASE_URL SLOW_MS
import WebSocket from 'ws'

const base = process.argv[2]
const slow = Number(process.argv[3])
const api = `${base}/api/harness`
let failures = 0
const fail = (msg) => { failures++; console.error(`FAIL: ${msg}`) }
const ok = (msg) => console.log(`ok: ${msg}`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const big = 'x'.repeat(200_000)

async function control(threadId, input) {
  const r = await fetch(`${api}/control`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ threadId, input }),
  })
  return r.json()
}

// Megabytes of events: each followUp is logged (harness.input.accepted) and echoed back.
async function flood(threadId) {
  for (let i = 0; i < 30; i++) await control(threadId, { op: 'followUp', message: big + i })
}

async function waitIdle(threadId) {
  for (let i = 0; i < 400; i++) {
    const s = await (await fetch(`${api}/snapshot?threadId=${threadId}`)).json()
    if (s.status === 'idle' && s.waitingInputs.length === 0) return
    await sleep(50)
  }
  fail(`thread ${threadId} never went idle`)
}

// Every cursor in SSE text, in order.
const cursorsOf = (text) => [...text.matchAll(/^id: (\S+)$/gm)].map((m) => m[1])

async function readAll(threadId, lastEventId) {
  const ac = new AbortController()
  const headers = lastEventId ? { 'last-event-id': lastEventId } : {}
  const r = await fetch(`${api}/events?threadId=${threadId}&v=2`, { headers, signal: ac.signal })
  const reader = r.body.getReader()
  const dec = new TextDecoder()
  let text = ''
  let quiet
  const stop = () => { clearTimeout(quiet); quiet = setTimeout(() => ac.abort(), 1000) }
  stop()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      text += dec.decode(value, { stream: true })
      stop()
    }
  } catch (e) { if (e.name !== 'AbortError') throw e }
  clearTimeout(quiet)
  return text
}

// ---- 1. SSE ------------------------------------------------------------------------------
{
  const t = 'slow-sse'
  await control(t, { op: 'prompt', message: 'first' })
  const r = await fetch(`${api}/events?threadId=${t}&v=2`)
  const reader = r.body.getReader()
  const dec = new TextDecoder()
  let text = dec.decode((await reader.read()).value, { stream: true })
  await flood(t)
  await sleep(slow * 2 + 1000) // not reading
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    text += dec.decode(value, { stream: true })
  }
  const frames = text.split('\n\n').filter((b) => b.startsWith('data: ') || b.includes('\ndata: '))
  const last = JSON.parse(frames.at(-1).split('\n').find((l) => l.startsWith('data: ')).slice(6))
  if (last.type !== 'harness.error' || last.code !== 'slow_consumer') fail(`SSE: the stream ended with ${JSON.stringify(last).slice(0, 200)}`)
  await waitIdle(t)
  const first = cursorsOf(text)
  const rest = cursorsOf(await readAll(t, first.at(-1)))
  const truth = cursorsOf(await readAll(t))
  const got = [...first, ...rest]
  if (JSON.stringify(got) !== JSON.stringify(truth)) fail(`SSE: ${got.length} cursors after the resume vs ${truth.length} in the thread`)
  else ok(`SSE: a reader that stopped got slow_consumer after ${first.length} events; Last-Event-ID ${first.at(-1)} gave the other ${rest.length}: each of ${truth.length} exactly once (${(text.length / 1e6).toFixed(1)} MB before the cut)`)
}

// ---- 2. WebSocket --------------------------------------------------------------------------
{
  const t = 'slow-socket'
  await control(t, { op: 'prompt', message: 'first' })
  const url = `${base.replace('http', 'ws')}/api/harness/socket`
  const first = []
  const code = await new Promise((resolve) => {
    const ws = new WebSocket(url)
    ws.on('open', () => ws.send(JSON.stringify({ type: 'harness.subscribe', threadId: t, v: 2 })))
    ws.on('message', (m) => {
      const f = JSON.parse(String(m))
      if (f.type === 'harness.event') first.push(f.cursor)
      if (f.type === 'harness.hello') {
        ws._socket.pause() // the client stops reading
        flood(t).then(() => sleep(slow * 1.5)).then(() => ws._socket.resume())
      }
    })
    ws.on('close', (c) => resolve(c))
  })
  if (code !== 4408) fail(`WebSocket: closed with ${code}, not 4408`)
  await waitIdle(t)
  const rest = []
  await new Promise((resolve) => {
    const ws = new WebSocket(url)
    let timer
    ws.on('open', () => ws.send(JSON.stringify({ type: 'harness.subscribe', threadId: t, v: 2, from: first.at(-1) })))
    ws.on('message', (m) => {
      const f = JSON.parse(String(m))
      if (f.type === 'harness.event') rest.push(f.cursor)
      clearTimeout(timer)
      timer = setTimeout(() => { ws.close(); resolve() }, 1000)
    })
  })
  const truth = cursorsOf(await readAll(t))
  const got = [...first, ...rest]
  if (JSON.stringify(got) !== JSON.stringify(truth)) fail(`WebSocket: ${got.length} cursors after the resume vs ${truth.length} in the thread`)
  else ok(`WebSocket: a reader that stopped was closed ${code} after ${first.length} events; from ${first.at(-1)} gave the other ${rest.length}: each of ${truth.length} exactly once`)
}

if (failures) { console.error(`${failures} failure(s)`); process.exit(1) }
console.log('slow consumer checks: all passed')
process.exit(0)
