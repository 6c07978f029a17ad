// A client playing jambonz, on the ws package, against a harness URL: greeting, speech with
// transcripts, a tool call, a barge-in, a turn cancelled while its tool runs, a refund the
// harness must refuse without sending a tool:call (its own gated tool, denied on the phone),
// unknown and malformed frames, a hang-up command; every frame the harness sends is checked. Also: the upgrade
// is refused without the secret (401), and protocol 2 is closed with 4000.
// Usage: node jambonz_client.mjs ws://127.0.0.1:PORT SECRET
import WebSocket from 'ws';

const [url, secret] = process.argv.slice(2);
const CALL_SID = 'CA-interop-0001';
let failures = 0;
const fail = (m) => { failures++; console.error(`MISMATCH: ${m}`); };
const eq = (a, b, what) => {
  if (JSON.stringify(a) !== JSON.stringify(b)) fail(`${what}: got ${JSON.stringify(a)}, want ${JSON.stringify(b)}`);
};

function connect(headers) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, 'harness.jambonz.org', { headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

// Every frame the harness sends goes through here.
function checked(ws, state) {
  const queue = [];
  const waiters = [];
  ws.on('message', (data, isBinary) => {
    if (isBinary) { fail('binary frame from the harness'); return; }
    let m;
    try { m = JSON.parse(data.toString()); } catch { fail(`not JSON: ${data}`); return; }
    const known = { 'reply:chunk': ['reply_id', 'chunk'], 'reply:done': ['reply_id'], 'tool:call': ['call_id', 'turn_id', 'name', 'args'], command: ['command_id', 'name', 'args'] };
    if (!(m.type in known)) fail(`unexpected type ${m.type}`);
    for (const k of known[m.type] ?? []) if (!(k in m)) fail(`${m.type} without ${k}`);
    if ('turn_id' in m) {
      if (!state.started.has(m.turn_id)) fail(`${m.type} for turn ${m.turn_id} before its turn:start`);
      if (state.cancelled.has(m.turn_id)) fail(`${m.type} for cancelled turn ${m.turn_id}`);
    }
    if (state.ended) fail(`${m.type} after session:end`);
    if (m.type === 'reply:chunk') {
      const r = state.replies.get(m.reply_id);
      if (r?.done) fail(`chunk after reply:done of ${m.reply_id}`);
      if (!r) {
        if (state.ids.has(m.reply_id)) fail(`reply_id ${m.reply_id} reused`);
        state.ids.add(m.reply_id);
        state.replies.set(m.reply_id, { text: '', done: false });
      } else if (m.interrupt) fail('interrupt on a later chunk');
      if (!Array.isArray(m.chunk?.choices)) fail('chunk without choices');
      state.replies.get(m.reply_id).text += m.chunk.choices[0]?.delta?.content ?? '';
    }
    if (m.type === 'reply:done') {
      const r = state.replies.get(m.reply_id) ?? { text: '' };
      r.done = true;
      state.replies.set(m.reply_id, r);
      if (m.turn_record !== undefined && JSON.stringify(m.turn_record).length > 16384) fail('turn_record over 16 KB');
    }
    for (const k of ['call_id', 'command_id']) {
      if (k in m) {
        if (state.ids.has(m[k])) fail(`${k} ${m[k]} reused`);
        state.ids.add(m[k]);
      }
    }
    const w = waiters.shift();
    if (w) w(m); else queue.push(m);
  });
  return {
    next(ms = 3000) {
      if (queue.length) return Promise.resolve(queue.shift());
      return new Promise((resolve) => {
        const t = setTimeout(() => { const i = waiters.indexOf(done); if (i >= 0) waiters.splice(i, 1); resolve(null); }, ms);
        const done = (m) => { clearTimeout(t); resolve(m); };
        waiters.push(done);
      });
    },
  };
}

const send = (ws, type, data) => ws.send(JSON.stringify({ type, call_sid: CALL_SID, ...data }));

async function reply(frames, turn_id) {
  // reply:chunk… then reply:done for this turn; returns {reply_id, text, record}.
  let reply_id; let text = '';
  for (;;) {
    const m = await frames.next();
    if (!m) { fail(`no reply:done for turn ${turn_id}`); return { text }; }
    if (m.type === 'reply:chunk') {
      eq(m.turn_id, turn_id, 'reply:chunk turn_id');
      reply_id ??= m.reply_id;
      eq(m.reply_id, reply_id, 'one reply per turn');
      text += m.chunk.choices[0]?.delta?.content ?? '';
    } else if (m.type === 'reply:done') {
      eq(m.turn_id, turn_id, 'reply:done turn_id');
      if (reply_id) eq(m.reply_id, reply_id, 'reply:done reply_id');
      if (typeof m.turn_record !== 'object') fail('reply:done without a turn_record object');
      return { reply_id: m.reply_id, text, record: m.turn_record };
    } else { fail(`unexpected ${m.type} in turn ${turn_id}`); return { text }; }
  }
}

async function main() {
  // 1. The upgrade is refused without the secret, and with a wrong one.
  for (const headers of [{}, { Authorization: 'Bearer wrong' }]) {
    try { (await connect(headers)).close(); fail(`upgrade accepted with ${JSON.stringify(headers)}`); }
    catch (e) { eq(e.message, 'HTTP 401', 'refusal'); }
  }
  const auth = { Authorization: `Bearer ${secret}` };

  // 2. protocol 2 → close 4000 with a reason.
  {
    const ws = await connect(auth);
    const closed = new Promise((r) => ws.once('close', (code, reason) => r([code, reason.toString()])));
    send(ws, 'session:start', { protocol: 2 });
    const [code, reason] = await closed;
    eq(code, 4000, 'close code for protocol 2');
    if (!reason) fail('close 4000 without a reason');
  }

  // 3. The call.
  const ws = await connect(auth);
  eq(ws.protocol, 'harness.jambonz.org', 'subprotocol echoed');
  const state = { started: new Set(), cancelled: new Set(), replies: new Map(), ids: new Set(), ended: false };
  const frames = checked(ws, state);
  const start = (turn_id, input) => { state.started.add(turn_id); send(ws, 'turn:start', { turn_id, input }); };

  send(ws, 'session:start', { protocol: 1, from: '+15551234567', to: '+15557654321', direction: 'inbound', language: 'en-US',
    metadata: { agent: 'acme' }, tools: [{ name: 'get_hours', description: 'Opening hours', parameters: { type: 'object', properties: {} } }] });
  start(1, { type: 'greeting' });
  const r1 = await reply(frames, 1);
  eq(r1.text, 'Thanks for calling Acme.', 'greeting');
  if (!Array.isArray(r1.record?.model_calls)) fail('turn_record.model_calls is not a list');
  else if (!('first_token_ms' in r1.record.model_calls[0]) || !('ms' in r1.record.model_calls[0])) fail('model_calls without first_token_ms/ms');

  // Unknown types and fields, and a malformed frame: ignored, the call goes on.
  send(ws, 'dtmf', { digit: '5' });
  ws.send('{not json');
  send(ws, 'event', { name: 'silence', duration_ms: 5000 });

  send(ws, 'speech:start', { turn_id: 2 });
  send(ws, 'transcript', { turn_id: 2, text: 'When are you', final: false });
  send(ws, 'transcript', { turn_id: 2, text: 'When are you open', final: true, confidence: 0.93 });
  start(2, { type: 'speech', text: 'When are you open', language: 'en-US' });
  const call = await frames.next();
  eq(call?.type, 'tool:call', 'turn 2 starts with a tool call');
  eq([call?.turn_id, call?.name, call?.args], [2, 'get_hours', {}], 'tool:call fields');
  send(ws, 'tool:result', { call_id: call?.call_id, result: { weekdays: '8am to 6pm' } });
  const r2 = await reply(frames, 2);
  eq(r2.text, "We're open 8am to 6pm on weekdays.", 'answer from the tool');
  if (!(r2.record?.steps ?? []).some((s) => s.name === 'tool_call')) fail('turn_record.steps has no tool_call step');

  // The barge-in.
  send(ws, 'event', { name: 'user_interruption', turn_id: 2, reply_id: r2.reply_id, spoken: "We're open 8am", unspoken: ' to 6pm on weekdays.' });
  state.cancelled.add(2);
  send(ws, 'turn:cancel', { turn_id: 2, reason: 'barge_in' });

  // A turn cancelled while its tool runs: nothing more may come for it.
  start(3, { type: 'speech', text: 'And your hours on Sunday?' });
  const call3 = await frames.next();
  eq([call3?.type, call3?.turn_id], ['tool:call', 3], 'turn 3 tool call');
  state.cancelled.add(3);
  send(ws, 'turn:cancel', { turn_id: 3, reason: 'barge_in' });
  send(ws, 'tool:result', { call_id: call3?.call_id, result: { weekdays: '8am to 6pm' } });
  const stray = await frames.next(400);
  if (stray) fail(`frame after turn 3 was cancelled: ${JSON.stringify(stray)}`);

  // A refund: the harness's own tool, gated; on the phone no one can approve it, so no
  // tool:call comes, and the agent says the refund was not done.
  start(4, { type: 'speech', text: 'Please refund order 42', language: 'en-US' });
  const r4 = await reply(frames, 4);
  if (!/^The refund was not done: approval denied/.test(r4.text)) fail(`refund answer: ${JSON.stringify(r4.text)}`);
  eq(r4.record?.own_tools, [{ name: 'refund', ok: false, denied: true }], 'turn_record.own_tools of the refused refund');

  // Goodbye: the harness hangs up with the hangup command.
  send(ws, 'speech:start', { turn_id: 5 });
  send(ws, 'transcript', { turn_id: 5, text: 'Thanks, bye', final: true });
  start(5, { type: 'speech', text: 'Thanks, bye', language: 'en-US' });
  const cmd = await frames.next();
  eq([cmd?.type, cmd?.name, cmd?.args], ['command', 'hangup', { reason: 'resolved' }], 'hangup command');
  send(ws, 'command:result', { command_id: cmd?.command_id, ok: true });
  send(ws, 'session:end', { reason: 'harness_hangup', duration_ms: 41250 });
  state.ended = true;
  const after = await frames.next(400);
  if (after) fail(`frame after session:end: ${JSON.stringify(after)}`);
  ws.close(1000, 'call ended');

  console.log(failures ? `${failures} mismatches` : 'jambonz client: every frame as the spec says');
  process.exit(failures ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
