// Interop checks of the harness-rs TanStack host against real peers:
//  1. every AG-UI event of a scripted session validates against @ag-ui/core's zod schemas;
//  2. a Node client reads our SSE and our WebSocket, reconnects with Last-Event-ID / `from`,
//     and gets every event exactly once;
//  3. the real @ag-ui/client HttpAgent runs a turn against POST run and gets the reply;
//  4. the FAQ agent of the example: a gated refund waits for its approval (the interrupt
//     @tanstack/ai-client resolves), runs exactly once when a `resolve` approves it and
//     never when one denies it; a question is answered with `answer`; a hand-off is shown;
//     reasoning, state and steps come around a look-up. Every event of it validates too.
// Exits non-zero on any mismatch. Usage: node check.mjs BASE_URL EVENTS_OUT_FILE
import { appendFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { EventSchema } from '@ag-ui/core/schemas'
import { HttpAgent } from '@ag-ui/client'
import WebSocket from 'ws'

const base = process.argv[2]
const out = process.argv[3]
const api = `${base}/api/harness`
let failures = 0
const fail = (msg) => { failures++; console.error(`FAIL: ${msg}`) }
const ok = (msg) => console.log(`ok: ${msg}`)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function control(threadId, input) {
  const r = await fetch(`${api}/control`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': 'interop-1' },
    body: JSON.stringify({ threadId, input }),
  })
  if (r.headers.get('x-request-id') !== 'interop-1') fail('X-Request-Id not echoed')
  return { status: r.status, body: await r.json() }
}

// A minimal WHATWG SSE reader: yields {id, data} and counts comments.
async function* sse(url, headers = {}, signal) {
  const r = await fetch(url, { headers, signal })
  if (r.status !== 200) throw new Error(`GET ${url}: ${r.status}`)
  const dec = new TextDecoder()
  let buf = ''
  let id = null
  let data = []
  for await (const chunk of r.body) {
    buf += dec.decode(chunk, { stream: true })
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, '')
      buf = buf.slice(i + 1)
      if (line === '') {
        if (data.length) yield { id, data: data.join('\n') }
        else if (id === null) { /* comment-only block */ }
        data = []
        id = null
        continue
      }
      if (line.startsWith(':')) { yield { comment: line }; continue }
      const c = line.indexOf(':')
      const field = c < 0 ? line : line.slice(0, c)
      let value = c < 0 ? '' : line.slice(c + 1)
      if (value.startsWith(' ')) value = value.slice(1)
      if (field === 'data') data.push(value)
      if (field === 'id') id = value
    }
  }
}

// Reads a thread's stream until `quietMs` pass with no frame; returns the frames.
async function readThread(threadId, { lastEventId, limit, quietMs = 1000 } = {}) {
  const ac = new AbortController()
  const frames = []
  const headers = lastEventId ? { 'last-event-id': lastEventId } : {}
  let timer
  const done = new Promise((resolve) => { timer = setTimeout(resolve, quietMs) })
  const reader = (async () => {
    try {
      for await (const ev of sse(`${api}/events?threadId=${threadId}&v=2`, headers, ac.signal)) {
        if (ev.comment) continue
        const f = JSON.parse(ev.data)
        if (f.type === 'harness.event' && ev.id !== f.cursor) fail(`SSE id ${ev.id} != cursor ${f.cursor}`)
        if (f.type === 'harness.hello' && ev.id !== null) fail('hello frame has an id')
        frames.push(f)
        clearTimeout(timer)
        if (limit && frames.length >= limit) { ac.abort(); return }
        timer = setTimeout(() => ac.abort(), quietMs)
      }
    } catch (e) { if (e.name !== 'AbortError') throw e }
  })()
  await Promise.race([done.then(() => ac.abort()), reader])
  await reader.catch(() => {})
  return frames
}

async function waitIdle(threadId) {
  for (let i = 0; i < 100; i++) {
    const r = await fetch(`${api}/snapshot?threadId=${threadId}`)
    const s = await r.json()
    if (s.status === 'idle' && s.waitingInputs.length === 0) return
    await sleep(50)
  }
  fail(`thread ${threadId} never went idle`)
}

// ---- 1. a scripted session; every AG-UI event validates against the zod schemas ----------
const t1 = 'interop-thread'
let r = await control(t1, { op: 'prompt', message: 'Hello', inputId: 'in-a' })
if (r.status !== 200 || r.body.status !== 'accepted') fail(`prompt receipt ${JSON.stringify(r)}`)
const again = await control(t1, { op: 'prompt', message: 'Hello', inputId: 'in-a' })
if (JSON.stringify(again.body) !== JSON.stringify(r.body)) fail('same inputId did not repeat the receipt')
await control(t1, { op: 'followUp', message: 'What are your hours on Saturday?' })
await waitIdle(t1)
// A turn that takes long: an input queues behind it, then a cancel ends it.
const slow = await control(t1, { op: 'prompt', message: 'wait for me' })
const queued = await control(t1, { op: 'followUp', message: 'after the wait' })
if (queued.body.status !== 'queued') fail(`followUp behind a running turn: ${JSON.stringify(queued.body)}`)
await sleep(200)
const cancelled = await control(t1, { op: 'cancel', operationId: slow.body.operationId })
if (cancelled.body.status !== 'accepted') fail(`cancel receipt ${JSON.stringify(cancelled.body)}`)
await waitIdle(t1)
const rej = await control(t1, { op: 'cancel', operationId: 'op-none' })
if (rej.body.status !== 'rejected' || rej.body.reason !== 'not_running') fail(`cancel receipt ${JSON.stringify(rej.body)}`)
const bad = await control(t1, { op: 'teleport' })
if (bad.status !== 400 || typeof bad.body.error !== 'string') fail(`bad input status ${bad.status}`)
const full = await readThread(t1)
if (full[0]?.type !== 'harness.hello' || full[0].v !== 2) fail('first frame is not hello v2')
const events = full.filter((f) => f.type === 'harness.event')
let valid = 0
const types = new Set()
for (const f of events) {
  const res = EventSchema.safeParse(f.event)
  if (!res.success) fail(`zod rejects ${JSON.stringify(f.event)}: ${res.error.message}`)
  else valid++
  types.add(f.event.type === 'CUSTOM' ? f.event.name : f.event.type)
}
for (const t of ['RUN_STARTED', 'TEXT_MESSAGE_START', 'TEXT_MESSAGE_CONTENT', 'TEXT_MESSAGE_END', 'TOOL_CALL_START', 'TOOL_CALL_ARGS', 'TOOL_CALL_END', 'TOOL_CALL_RESULT', 'RUN_FINISHED', 'harness.usage', 'harness.operation.started', 'harness.operation.finished', 'harness.input.accepted', 'harness.input.queued', 'harness.input.settled', 'harness.input.rejected', 'STEP_STARTED', 'STEP_FINISHED', 'REASONING_START', 'REASONING_MESSAGE_START', 'REASONING_MESSAGE_CONTENT', 'REASONING_MESSAGE_END', 'REASONING_END', 'STATE_SNAPSHOT', 'STATE_DELTA']) {
  if (!types.has(t)) fail(`the session has no ${t}`)
}
ok(`${valid}/${events.length} events of the scripted session validate against @ag-ui/core EventSchema`)
writeFileSync(out, events.map((f) => JSON.stringify(f.event)).join('\n') + '\n')
const cancelledRun = events.find((f) => f.event.type === 'RUN_FINISHED' && f.event.outcome?.type === 'cancelled')
if (!cancelledRun || cancelledRun.operationId !== slow.body.operationId) fail('no RUN_FINISHED with outcome cancelled for the cancelled turn')
else ok(`the cancelled turn ended with RUN_FINISHED outcome {type:'cancelled'}, valid for zod`)
const text = events.filter((f) => f.event.type === 'TEXT_MESSAGE_CONTENT').map((f) => f.event.delta).join('')
if (!text.includes('You said: Hello') || !text.includes("On Saturday we're open 9am to 1pm.")) fail(`text was ${JSON.stringify(text)}`)

// ---- 2a. SSE: disconnect, reconnect with Last-Event-ID, every event exactly once ----------
const cursors = events.map((f) => f.cursor)
const part = await readThread(t1, { limit: 6 })
const lastSeen = part.filter((f) => f.type === 'harness.event').at(-1).cursor
const rest = await readThread(t1, { lastEventId: lastSeen })
const seen = [...part, ...rest].filter((f) => f.type === 'harness.event').map((f) => f.cursor)
if (JSON.stringify(seen) !== JSON.stringify(cursors)) fail(`SSE resume: ${seen} vs ${cursors}`)
else ok(`SSE: ${part.length - 1} events, reconnect with Last-Event-ID ${lastSeen}, ${rest.length - 1} more: each of ${cursors.length} exactly once`)
// ?from= works too, and the header wins over it.
const both = await readThread(t1, { lastEventId: cursors[2] })
const fromQ = []
{
  const ac = new AbortController()
  setTimeout(() => ac.abort(), 500)
  try {
    for await (const ev of sse(`${api}/events?threadId=${t1}&v=2&from=${cursors[0]}`, { 'last-event-id': cursors[2] }, ac.signal)) {
      if (ev.data) fromQ.push(JSON.parse(ev.data))
    }
  } catch (e) { if (e.name !== 'AbortError') throw e }
}
if (fromQ[1]?.cursor !== cursors[3] || both[1]?.cursor !== cursors[3]) fail('Last-Event-ID did not win over ?from=')
else ok('Last-Event-ID wins over ?from=')

// ---- 2b. WebSocket: subscribe, prompt, drop, resubscribe with from, exactly once ----------
const t2 = 'interop-socket'
function openSocket(from) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/harness/socket`)
    const frames = []
    ws.on('open', () => ws.send(JSON.stringify({ type: 'harness.subscribe', threadId: t2, v: 2, ...(from ? { from } : {}) })))
    ws.on('message', (m) => frames.push(JSON.parse(String(m))))
    ws.on('error', reject)
    resolve({ ws, frames })
  })
}
const s1 = await openSocket()
await sleep(200)
s1.ws.send(JSON.stringify({ type: 'harness.input', requestId: 'req-1', input: { op: 'prompt', message: 'Hello socket', inputId: 'ws-1' } }))
s1.ws.send(JSON.stringify({ type: 'harness.subscribe', threadId: t2 }))
s1.ws.send('{not json')
let cut
for (let i = 0; i < 100; i++) {
  await sleep(20)
  const evs = s1.frames.filter((f) => f.type === 'harness.event')
  // The two error frames answer the frames sent after the input; the events come from the
  // log on their own schedule, so either can come first: wait for both before cutting.
  const nerr = s1.frames.filter((f) => f.type === 'harness.error').length
  if (evs.length >= 5 && nerr >= 2) { cut = evs[4].cursor; s1.ws.terminate(); break }
}
const rcpt = s1.frames.find((f) => f.type === 'harness.receipt')
if (!rcpt || rcpt.requestId !== 'req-1' || rcpt.inputId !== 'ws-1') fail(`socket receipt ${JSON.stringify(rcpt)}`)
const errs = s1.frames.filter((f) => f.type === 'harness.error')
if (errs.length !== 2 || errs.some((e) => e.code !== 'invalid_frame')) fail(`socket errors ${JSON.stringify(errs)}`)
await waitIdle(t2)
const s2 = await openSocket(cut)
for (let i = 0; i < 100 && s2.frames.filter((f) => f.type === 'harness.event').length < 10; i++) await sleep(20)
await sleep(200)
// A close from the client gets a close back (RFC 6455 5.5.1: "the endpoint MUST send a Close
// frame in response"): `ws` reports 1006 when the server just drops the connection.
const closed = new Promise((resolve) => s2.ws.on('close', (code) => resolve(code)))
s2.ws.close(1000, 'done')
const closeCode = await Promise.race([closed, sleep(2000).then(() => 'no close event')])
if (closeCode !== 1000) fail(`socket close from the client: the host answered ${closeCode}, not the close 1000`)
else ok('WebSocket: a close from the client gets its close frame back (1000)')
// A client that breaks the WebSocket protocol gets a close frame with the code of RFC 6455
// 7.4.1 before the connection ends (`ws` reports 1006 when there is none): a text message
// that is not UTF-8 is 1007 (RFC 6455 8.1), a message past the host's limit (2 MiB here) 1009.
for (const [what, data, want] of [
  ['a text message that is not UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 1007],
  ['a message past the size limit', Buffer.alloc((2 << 20) + 4096, 0x20), 1009],
]) {
  const s = await openSocket()
  await sleep(50)
  const closed = new Promise((resolve) => s.ws.on('close', (code) => resolve(code)))
  s.ws.on('error', () => {})
  s.ws.send(data, { binary: false })
  const code = await Promise.race([closed, sleep(3000).then(() => 'no close event')])
  if (code !== want) fail(`socket: ${what}: the host closed with ${code}, not ${want}`)
  else ok(`WebSocket: ${what} gets the close ${want}`)
}
// Socket events up to the cut, then the rest after reconnecting, against the whole thread.
const truth = (await readThread(t2)).filter((f) => f.type === 'harness.event').map((f) => f.cursor)
const firstPart = s1.frames.filter((f) => f.type === 'harness.event').map((f) => f.cursor)
const upToCut = firstPart.slice(0, firstPart.indexOf(cut) + 1)
const got = [...upToCut, ...s2.frames.filter((f) => f.type === 'harness.event').map((f) => f.cursor)]
if (JSON.stringify(got) !== JSON.stringify(truth)) fail(`socket resume: ${got} vs ${truth}`)
else ok(`WebSocket: dropped after cursor ${cut}, resubscribed with from: ${s2.frames.filter((f) => f.type === 'harness.event').length} more, each of ${truth.length} events exactly once`)
for (const f of [...s1.frames, ...s2.frames].filter((f) => f.type === 'harness.event')) {
  if (!EventSchema.safeParse(f.event).success) fail(`zod rejects socket event ${JSON.stringify(f.event)}`)
}

// ---- 2c. every error answer is JSON {error} with the request id, even the router's own ----
for (const [what, url, init] of [
  ['404 (no such route)', `${api}/nope`, {}],
  ['405 (wrong method)', `${api}/control`, { method: 'GET' }],
  ['400 (bad JSON)', `${api}/control`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' }],
]) {
  const r = await fetch(url, { ...init, headers: { ...(init.headers || {}), 'x-request-id': 'err-1' } })
  const text = await r.text()
  let body
  try { body = JSON.parse(text) } catch { body = null }
  if (r.status < 400 || typeof body?.error !== 'string' || r.headers.get('x-request-id') !== 'err-1') {
    fail(`${what}: ${r.status} ${JSON.stringify(text.slice(0, 80))} x-request-id=${r.headers.get('x-request-id')}`)
  } else ok(`${what}: ${r.status} ${text}`)
}

// 413: the host answers as soon as it has read past its limit and closes, so a client still
// writing the body can get EPIPE instead of the answer (fetch does, at random). A raw socket
// sends a little past the limit, stops, and reads the answer.
{
  const { hostname: host, port } = new URL(base)
  const raw = await new Promise((resolve, reject) => {
    const sock = net.connect(Number(port), host, () => {
      sock.write(`POST /api/harness/control HTTP/1.1\r\nHost: ${host}:${port}\r\ncontent-type: application/json\r\ncontent-length: ${8 << 20}\r\nx-request-id: err-1\r\n\r\n`)
      sock.write('x'.repeat((2 << 20) + (64 << 10))) // past the 2 MiB limit, short of the declared length
    })
    let got = ''
    sock.on('data', (d) => { got += d; if (/\r\n\r\n[\s\S]*\}/.test(got)) { sock.destroy(); resolve(got) } })
    sock.on('error', (e) => (got ? resolve(got) : reject(e)))
    sock.on('close', () => resolve(got))
    setTimeout(() => { sock.destroy(); resolve(got) }, 5000)
  })
  const [head, body = ''] = raw.split('\r\n\r\n')
  const chunked = /transfer-encoding: chunked/i.test(head)
  const json = chunked ? body.split('\r\n').filter((l, i) => i % 2 === 1).join('') : body
  let parsed
  try { parsed = JSON.parse(json) } catch { parsed = null }
  if (!/^HTTP\/1\.1 413/.test(head) || typeof parsed?.error !== 'string' || !/x-request-id: err-1/i.test(head)) {
    fail(`413 (body over the limit): ${JSON.stringify(raw.slice(0, 300))}`)
  } else ok(`413 (body over the limit): ${json}`)
}

// ---- 2d. a subscribe with `from: null` (a JS client with no cursor yet) starts from the top --
{
  const ws = new WebSocket(`${base.replace('http', 'ws')}/api/harness/socket`)
  const frames = []
  ws.on('message', (m) => frames.push(JSON.parse(String(m))))
  await new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('error', reject) })
  ws.send(JSON.stringify({ type: 'harness.subscribe', threadId: t2, from: null, v: 2 }))
  for (let i = 0; i < 100 && frames.filter((f) => f.type === 'harness.event').length < truth.length; i++) await sleep(20)
  const cursors = frames.filter((f) => f.type === 'harness.event').map((f) => f.cursor)
  if (frames[0]?.type !== 'harness.hello' || JSON.stringify(cursors) !== JSON.stringify(truth)) {
    fail(`subscribe with from: null: ${JSON.stringify(frames.slice(0, 2))}, ${cursors.length} of ${truth.length} events`)
  } else ok(`WebSocket: subscribe with from: null replays all ${truth.length} events`)
  ws.terminate()
}

// ---- 3. the real AG-UI client: HttpAgent against POST run -------------------------------
const agent = new HttpAgent({
  url: `${api}/run`,
  threadId: 'interop-agui',
  initialMessages: [{ id: 'u-1', role: 'user', content: 'Hello from HttpAgent' }],
})
const seenTypes = []
const result = await agent.runAgent({ runId: 'run-agui-1' }, { onEvent: ({ event }) => { seenTypes.push(event.type) } })
const reply = agent.messages.filter((m) => m.role === 'assistant').map((m) => m.content).join('')
if (reply !== 'You said: Hello from HttpAgent') fail(`HttpAgent reply ${JSON.stringify(reply)} (events ${seenTypes})`)
else ok(`@ag-ui/client HttpAgent ran a turn over POST run: ${JSON.stringify(reply)} (${result.newMessages.length} new message)`)
if (seenTypes[0] !== 'RUN_STARTED' || seenTypes.at(-1) !== 'RUN_FINISHED') fail(`HttpAgent events ${seenTypes}`)
// The client's own checks of the event order (its verifier) pass over a turn with a step,
// reasoning, state and a tool call.
{
  const hours = new HttpAgent({
    url: `${api}/run`,
    threadId: 'interop-agui-hours',
    initialMessages: [{ id: 'u-1', role: 'user', content: 'What are your hours on Saturday?' }],
  })
  const types = []
  await hours.runAgent({ runId: 'run-agui-2' }, { onEvent: ({ event }) => { types.push(event.type) } })
  const said = hours.messages.filter((m) => m.role === 'assistant').map((m) => m.content ?? '').join('')
  const want = ['STEP_STARTED', 'REASONING_START', 'REASONING_MESSAGE_CONTENT', 'REASONING_END', 'STATE_SNAPSHOT', 'TOOL_CALL_RESULT', 'STATE_DELTA', 'STEP_FINISHED']
  if (said !== "On Saturday we're open 9am to 1pm." || want.some((t) => !types.includes(t))) fail(`HttpAgent hours: ${JSON.stringify(said)} (events ${types})`)
  else ok(`@ag-ui/client HttpAgent ran a turn with a step, reasoning, state and a tool call: ${JSON.stringify(said)}`)
}

// ---- 4. the FAQ agent: an approval, a denial, a question, a hand-off -----------------------
const faqEvents = []
async function settled(threadId) {
  await waitIdle(threadId)
  const evs = (await readThread(threadId, { quietMs: 400 })).filter((f) => f.type === 'harness.event')
  for (const f of evs) {
    const res = EventSchema.safeParse(f.event)
    if (!res.success) fail(`zod rejects ${JSON.stringify(f.event)}: ${res.error.message}`)
  }
  return evs
}
const named = (evs, name) => evs.filter((f) => f.event.type === name || f.event.name === name)
const saidIn = (evs) => named(evs, 'TEXT_MESSAGE_CONTENT').map((f) => f.event.delta).join('')

// 4a. "Please refund order 42": TOOL_CALL_*, harness.wait.opened kind approval, the run ends
// with the interrupt; no tool result. A resolve that approves: one result, "refunded order 42".
{
  const t = 'faq-approve'
  await control(t, { op: 'prompt', message: 'Please refund order 42' })
  let evs = await settled(t)
  const opened = named(evs, 'harness.wait.opened')
  const fin = named(evs, 'RUN_FINISHED')[0]?.event
  const call = named(evs, 'TOOL_CALL_START')[0]?.event
  const waitId = opened[0]?.event.value.waitId
  const expected = {
    id: waitId, reason: 'approval_required', message: 'Approve refund?', toolCallId: call?.toolCallId,
    metadata: { kind: 'approval', toolName: 'refund', input: { order_id: 42 } },
  }
  if (opened.length !== 1 || opened[0].event.value.kind !== 'approval') fail(`refund: wait.opened ${JSON.stringify(opened)}`)
  else if (JSON.stringify(fin?.outcome) !== JSON.stringify({ type: 'interrupt', interrupts: [expected] })) fail(`refund: RUN_FINISHED ${JSON.stringify(fin)}`)
  else if (named(evs, 'TOOL_CALL_RESULT').length) fail('refund: a tool result before the approval')
  else ok(`refund: harness.wait.opened kind approval, RUN_FINISHED with the interrupt ${JSON.stringify(expected)}, no tool result`)
  const r = await control(t, { op: 'resolve', resume: [{ interruptId: waitId, status: 'resolved', payload: { approved: true } }] })
  if (r.body.status !== 'accepted' || !r.body.operationId) fail(`resolve receipt ${JSON.stringify(r.body)}`)
  evs = await settled(t)
  const results = named(evs, 'TOOL_CALL_RESULT')
  const again = named(evs, 'RUN_STARTED').find((f) => f.event.runId === r.body.operationId)?.event
  if (results.length !== 1 || !results[0].event.content.includes('refunded order 42')) fail(`approved refund: results ${JSON.stringify(results)}`)
  else if (again?.parentRunId !== fin?.runId) fail(`approved refund: RUN_STARTED ${JSON.stringify(again)}`)
  else ok(`approved: the turn ran again (parentRunId ${again.parentRunId}) and exactly one TOOL_CALL_RESULT: ${results[0].event.content}; said ${JSON.stringify(saidIn(evs))}`)
  const twice = await control(t, { op: 'resolve', resume: [{ interruptId: waitId, status: 'resolved', payload: { approved: true } }] })
  if (twice.body.status !== 'rejected' || twice.body.reason !== 'not_waiting') fail(`a second resolve: ${JSON.stringify(twice.body)}`)
  else ok('a second resolve of the same wait: rejected not_waiting')
  faqEvents.push(...evs)
}

// 4b. The same refund denied: the tool's code never runs, no result of it appears.
{
  const t = 'faq-deny'
  await control(t, { op: 'prompt', message: 'Please refund order 42' })
  let evs = await settled(t)
  const waitId = named(evs, 'harness.wait.opened')[0]?.event.value.waitId
  await control(t, { op: 'resolve', resume: [{ interruptId: waitId, status: 'resolved', payload: { approved: false } }] })
  evs = await settled(t)
  if (evs.some((f) => JSON.stringify(f.event).includes('refunded order'))) fail('denied refund: a result of the tool appeared')
  else if (!saidIn(evs).includes('approval denied')) fail(`denied refund: said ${JSON.stringify(saidIn(evs))}`)
  else ok(`denied: the refund never ran; said ${JSON.stringify(saidIn(evs))}`)
  faqEvents.push(...evs)
}

// 4c. "What are your hours?" asks "Which day?"; the answer continues the turn.
{
  const t = 'faq-question'
  await control(t, { op: 'prompt', message: 'What are your hours?' })
  let evs = await settled(t)
  const q = named(evs, 'harness.question')[0]?.event.value
  if (q?.message !== 'Which day?' || named(evs, 'harness.wait.opened')[0]?.event.value.kind !== 'question') fail(`question: ${JSON.stringify(q)}`)
  const r = await control(t, { op: 'answer', questionId: q?.questionId, value: 'Saturday' })
  if (r.body.status !== 'accepted') fail(`answer receipt ${JSON.stringify(r.body)}`)
  evs = await settled(t)
  const answered = named(evs, 'harness.question.answered')[0]?.event.value
  if (answered?.questionId !== q?.questionId || !saidIn(evs).includes("On Saturday we're open 9am to 1pm.")) fail(`answered: ${JSON.stringify(answered)}, said ${JSON.stringify(saidIn(evs))}`)
  else ok(`question ${JSON.stringify(q)} answered "Saturday": said ${JSON.stringify(saidIn(evs))}`)
  faqEvents.push(...evs)
}

// 4d. "What are your hours on Saturday?" answers at once through get_hours.
{
  const t = 'faq-saturday'
  await control(t, { op: 'prompt', message: 'What are your hours on Saturday?' })
  const evs = await settled(t)
  if (named(evs, 'harness.question').length || named(evs, 'TOOL_CALL_START')[0]?.event.toolCallName !== 'get_hours') fail('named day: asked, or no get_hours')
  else ok(`named day: get_hours at once, said ${JSON.stringify(saidIn(evs))}`)
  faqEvents.push(...evs)
}

// 4e. A person: harness.handoff by code, with a wait of kind human.
{
  const t = 'faq-person'
  await control(t, { op: 'prompt', message: "I'd like a person, please" })
  const evs = await settled(t)
  const h = named(evs, 'harness.handoff')[0]?.event.value
  const w = named(evs, 'harness.wait.opened')[0]?.event.value
  if (JSON.stringify(h?.to) !== '{"human":true}' || h?.by !== 'code' || w?.kind !== 'human' || w?.waitId !== h?.waitId) fail(`hand-off: ${JSON.stringify(h)} ${JSON.stringify(w)}`)
  else ok(`hand-off: ${JSON.stringify(h)}`)
  faqEvents.push(...evs)
}
const faqTypes = new Set(faqEvents.map((f) => (f.event.type === 'CUSTOM' ? f.event.name : f.event.type)))
for (const t of ['harness.wait.opened', 'harness.wait.settled', 'harness.question', 'harness.question.answered', 'harness.handoff', 'REASONING_START', 'STATE_SNAPSHOT', 'STATE_DELTA', 'STEP_STARTED', 'STEP_FINISHED']) {
  if (!faqTypes.has(t)) fail(`the FAQ session has no ${t}`)
}
ok(`${faqEvents.length} events of the FAQ session validate against @ag-ui/core EventSchema`)
appendFileSync(out, faqEvents.map((f) => JSON.stringify(f.event)).join('\n') + '\n')

if (failures) { console.error(`${failures} failure(s)`); process.exit(1) }
console.log('node checks: all passed')
process.exit(0)
