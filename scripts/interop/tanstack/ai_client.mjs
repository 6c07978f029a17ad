// The real @tanstack/ai-client (ChatClient + fetchServerSentEvents, the engine behind
// useChat) against the harness-rs TanStack host, on the one URL it uses for everything
// (`POST run`, `GET run?offset=-1&runId=` joinRun, `GET run?threadId=` hydrate):
//  1. chat: a message gets the agent's reply;
//  2. a server tool call: the call and its result are in the reply's parts;
//  3. an approval as ai-client expresses it: the run ends with the interrupt, the call is
//     `approval-requested`, addToolApprovalResponse({approved:true}) resumes it and the tool
//     runs once;
//  4. joinRun mid-run: a second ChatClient (persistence: true) hydrates the thread, sees the
//     active run and tails it; a raw joinRun replays from RUN_STARTED within 2 s;
//  5. joinRun after the end: the whole run, RUN_STARTED through RUN_FINISHED; an unknown run
//     is 404, which the client treats quietly;
//  6. hydrate: a reloaded client gets the transcript as UI messages (tool parts included),
//     and a pending approval it can resolve.
// Exits non-zero on any mismatch. Usage: node ai_client.mjs BASE_URL
import { ChatClient, fetchServerSentEvents } from '@tanstack/ai-client'

const base = process.argv[2]
const url = `${base}/api/harness/run`
let failures = 0
const fail = (msg) => { failures++; console.error(`FAIL: ${msg}`) }
const ok = (msg) => console.log(`ok: ai-client: ${msg}`)
const check = (cond, msg, detail = '') => (cond ? ok(msg) : fail(`${msg} ${detail}`))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const uniq = (p) => `${p}-${Date.now()}-${Math.random().toString(36).slice(2, 7)}`

function client(threadId, extra = {}) {
  const errors = []
  const runIds = []
  const c = new ChatClient({
    connection: fetchServerSentEvents(url),
    threadId,
    onError: (e) => errors.push(e),
    onChunk: (ch) => { if (ch.type === 'RUN_STARTED') runIds.push(ch.runId) },
    ...extra,
  })
  return { c, errors, runIds }
}

const textOf = (m) => (m?.parts || []).filter((p) => p.type === 'text').map((p) => p.content).join('')
const lastAssistant = (c) => [...c.getMessages()].reverse().find((m) => m.role === 'assistant')
const toolCalls = (c) => c.getMessages().flatMap((m) => (m.parts || []).filter((p) => p.type === 'tool-call'))

async function until(cond, ms, step = 50) {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await cond()) return true
    await sleep(step)
  }
  return false
}

async function collect(iterable, { max = 1000, ms = 5000 } = {}) {
  const chunks = []
  const timer = sleep(ms).then(() => 'timeout')
  const it = iterable[Symbol.asyncIterator]()
  while (chunks.length < max) {
    const r = await Promise.race([it.next(), timer])
    if (r === 'timeout' || r.done) break
    chunks.push(r.value)
  }
  await it.return?.()
  return chunks
}

// ---- 1. chat ----
const t1 = uniq('aic-chat')
{
  const { c, errors, runIds } = client(t1)
  await c.sendMessage('Hello there')
  const reply = textOf(lastAssistant(c))
  check(errors.length === 0 && reply.length > 0 && c.getStatus() !== 'error',
    `chat: "Hello there" got the reply ${JSON.stringify(reply)}`, JSON.stringify(errors.map(String)))
  check(runIds.length === 1 && /^run-/.test(runIds[0]), `chat: the run kept the client's runId ${runIds[0]}`)

  // ---- 5. joinRun after the end: the whole run replays, then the stream ends ----
  const adapter = fetchServerSentEvents(url)
  const chunks = await collect(adapter.joinRun(runIds[0]))
  const types = chunks.map((ch) => ch.type)
  const joined = chunks.filter((ch) => ch.type === 'TEXT_MESSAGE_CONTENT').map((ch) => ch.delta).join('')
  check(types[0] === 'RUN_STARTED' && types.at(-1) === 'RUN_FINISHED' && joined === reply,
    `joinRun after the end: ${types.length} events, RUN_STARTED … RUN_FINISHED, the same text`, JSON.stringify(types))
  const r404 = await fetch(`${url}?offset=-1&runId=run-0-nope`)
  check(r404.status === 404, `joinRun of an unknown run: 404 (the client forgets it quietly)`, `got ${r404.status}`)
}

// ---- 2. a server tool call ----
const t2 = uniq('aic-tools')
let hoursReply = ''
{
  const { c, errors } = client(t2)
  await c.sendMessage('What are your hours on Saturday?')
  const call = toolCalls(c).find((p) => p.name === 'get_hours')
  hoursReply = textOf(lastAssistant(c))
  check(errors.length === 0 && call && call.output !== undefined && hoursReply.length > 0,
    `server tool: get_hours ran (output ${JSON.stringify(call?.output)}), reply ${JSON.stringify(hoursReply)}`,
    JSON.stringify({ parts: c.getMessages().map((m) => m.parts), errors: errors.map(String) }))
}

// ---- 3. an approval, as ai-client expresses it ----
const t3 = uniq('aic-approve')
{
  const { c, errors } = client(t3)
  await c.sendMessage('Please refund order 42')
  const pending = c.getPendingInterrupts?.() ?? c.getInterrupts()
  const call = toolCalls(c).find((p) => p.name === 'refund')
  check(pending.length === 1 && call?.state === 'approval-requested' && call?.approval?.id,
    `approval: the run ended with 1 interrupt and the call is approval-requested (${call?.approval?.id})`,
    JSON.stringify({ pending, call }))
  if (call?.approval?.id) {
    await c.addToolApprovalResponse({ id: call.approval.id, approved: true })
    await until(() => !c.getIsLoading(), 5000)
    const after = toolCalls(c).find((p) => p.name === 'refund')
    const results = c.getMessages().flatMap((m) => m.parts || []).filter((p) => p.type === 'tool-result')
    const text = textOf(lastAssistant(c))
    check(errors.length === 0 && JSON.stringify(after?.output ?? results).includes('refunded order 42') && text.length > 0,
      `approval: addToolApprovalResponse({approved:true}) resumed the run, the refund ran: ${JSON.stringify(text)}`,
      JSON.stringify({ after, results, errors: errors.map(String) }))
  }
}

// ---- 6. hydrate, and a pending approval resolved after a reload ----
{
  const { c, errors } = client(t2, { persistence: true })
  c.attach()
  await until(() => c.getMessages().length >= 2, 3000)
  const msgs = c.getMessages()
  const user = msgs.find((m) => m.role === 'user')
  const call = toolCalls(c).find((p) => p.name === 'get_hours')
  check(errors.length === 0 && textOf(user) === 'What are your hours on Saturday?' && call?.output !== undefined &&
      textOf(lastAssistant(c)).includes(hoursReply),
    `hydrate: ${msgs.length} UI messages, the user's, the get_hours call with its output, the reply`,
    JSON.stringify(msgs))
  c.detach?.()

  const t4 = uniq('aic-hydrate-approval')
  const first = client(t4)
  await first.c.sendMessage('Please refund order 7')
  const reloaded = client(t4, { persistence: true })
  reloaded.c.attach()
  await until(() => (reloaded.c.getPendingInterrupts?.() ?? reloaded.c.getInterrupts()).length === 1, 3000)
  const hcall = toolCalls(reloaded.c).find((p) => p.name === 'refund')
  check(hcall?.state === 'approval-requested',
    `hydrate: a pending approval comes back as an interrupt and an approval-requested call`,
    JSON.stringify(reloaded.c.getMessages()))
  if (hcall?.approval?.id) {
    await reloaded.c.addToolApprovalResponse({ id: hcall.approval.id, approved: false })
    await until(() => !reloaded.c.getIsLoading(), 5000)
    const again = await (await fetch(`${url}?threadId=${t4}`)).json()
    check(again.interrupts === null && reloaded.errors.length === 0,
      `hydrate: the hydrated approval was resolved (denied); the thread waits on nothing`, JSON.stringify(again))
  }
}

// ---- 4. joinRun mid-run: the slow reply ("wait…" streams for ~30 s) ----
{
  const t5 = uniq('aic-join')
  const a = client(t5)
  const sending = a.c.sendMessage('wait for me please')
  await until(() => a.runIds.length === 1, 3000)
  await sleep(300)
  const runId = a.runIds[0]

  const started = Date.now()
  const raw = await collect(fetchServerSentEvents(url).joinRun(runId), { max: 3, ms: 2000 })
  check(raw[0]?.type === 'RUN_STARTED' && raw[0]?.runId === runId && Date.now() - started < 2000,
    `joinRun mid-run: the replay starts with RUN_STARTED within 2 s (${Date.now() - started} ms)`, JSON.stringify(raw))

  const h = await (await fetch(`${url}?threadId=${t5}`)).json()
  check(h.activeRun?.runId === runId, `hydrate mid-run: activeRun is the running run`, JSON.stringify(h))

  const b = client(t5, { persistence: true })
  b.c.attach()
  const tailing = await until(() => textOf(lastAssistant(b.c)).startsWith('Waiting'), 3000)
  check(tailing && b.c.getIsLoading?.() !== false,
    `joinRun mid-run: a reloaded client hydrated, joined the active run and shows ${JSON.stringify(textOf(lastAssistant(b.c)))}`,
    JSON.stringify({ msgs: b.c.getMessages(), errors: b.errors.map(String) }))

  // End the slow run early (a cancel input); the joined client sees the end.
  const r = await fetch(`${base}/api/harness/control`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ threadId: t5, input: { op: 'cancel', operationId: runId } }),
  })
  const receipt = await r.json()
  const ended = await until(() => !b.c.getIsLoading(), 5000)
  await Promise.race([sending, sleep(5000)])
  check(receipt.status === 'accepted' && ended && b.errors.length === 0,
    `joinRun mid-run: the joined run ended with the run (cancelled), no error shown`,
    JSON.stringify({ receipt, errors: b.errors.map(String) }))
}

if (failures) {
  console.error(`ai-client checks: ${failures} failed`)
  process.exit(1)
}
console.log('ai-client checks: all passed')
process.exit(0)
