// The load of scripts/load/jambonz_vs_node.py: jambonz's side of many calls, on the `ws`
// package (installed in scripts/interop/jambonz by the Python script), against a harness
// URL. The same frames for any harness.
//
//   node jambonz_load.mjs turns URL CALLS WARMUP_S MEASURE_S TURNS_PER_CALL
//     CALLS calls at once, each: session:start, the greeting turn, then turns saying "When are
//     you open" (the spec's minimal harness answers it in 7 chunks, one a word) one after the
//     other, each started when the last one's reply:done came; after TURNS_PER_CALL turns,
//     session:end and a new call. Prints `measure-start` after WARMUP_S seconds and
//     `measure-end {json}` MEASURE_S seconds later (reply:chunk frames, turns, calls in that
//     window), then ends every call.
//   node jambonz_load.mjs idle URL CALLS
//     CALLS calls: session:start and the greeting turn each, then idle. Prints `idle-ready
//     {json}` once every greeting was answered; ends the calls when stdin closes.
//
// Loopback only: the URL must be ws://127.0.0.1 or ws://localhost.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../interop/jambonz/package.json', import.meta.url));
const WebSocket = require('ws');

const [mode, url, ...rest] = process.argv.slice(2);
if (!/^ws:\/\/(127\.0\.0\.1|localhost)[:/]/.test(url ?? '')) {
  console.error('usage: node jambonz_load.mjs turns|idle ws://127.0.0.1:PORT ...');
  process.exit(2);
}

let nextSid = 0;
const counts = { chunks: 0, turns: 0, calls: 0, errors: 0 };

// One call: resolves with the socket once the greeting's reply:done came.
function openCall(onDone) {
  return new Promise((resolve, reject) => {
    const sid = `CA-load-${++nextSid}`;
    const ws = new WebSocket(url, 'harness.jambonz.org', { perMessageDeflate: false });
    const send = (type, data) => ws.send(JSON.stringify({ type, call_sid: sid, ...data }));
    let turn = 1;
    ws.on('open', () => {
      send('session:start', { protocol: 1, from: '+15551234567', to: '+15557654321', direction: 'inbound', language: 'en-US' });
      send('turn:start', { turn_id: 1, input: { type: 'greeting' } });
    });
    ws.on('message', (raw) => {
      // Both servers write `type` first: the frames of a reply are told apart by their
      // first bytes, so that the load costs little per frame (it shares the machine).
      const head = raw.toString('latin1', 0, 21);
      if (head === '{"type":"reply:chunk"') counts.chunks++;
      else if (head.startsWith('{"type":"reply:done"')) {
        counts.turns++;
        if (turn === 1) resolve({ ws, send, next: () => { turn++; send('turn:start', { turn_id: turn, input: { type: 'speech', text: 'When are you open', language: 'en-US' } }); return turn; } });
        onDone?.(turn);
      }
    });
    ws.on('error', (e) => { counts.errors++; reject(e); });
    ws.on('unexpected-response', (_req, res) => { counts.errors++; reject(new Error(`HTTP ${res.statusCode}`)); });
  });
}

async function turnsMode(calls, warmupS, measureS, turnsPerCall) {
  let running = true;
  async function caller() {
    while (running) {
      let call;
      const finished = new Promise((resolve) => {
        openCall((turn) => {
          if (turn === 1) return; // the greeting: openCall resolves
          if (!running || turn >= turnsPerCall) resolve();
          else call.next();
        }).then((c) => { call = c; c.next(); }, () => resolve());
      });
      await finished;
      if (call) {
        call.send('session:end', { reason: 'caller_hangup', duration_ms: 1000 });
        call.ws.close(1000);
        counts.calls++;
      } else {
        await new Promise((r) => setTimeout(r, 100)); // a refused call: do not spin
      }
    }
  }
  const all = Array.from({ length: calls }, caller);
  await new Promise((r) => setTimeout(r, warmupS * 1000));
  const start = { ...counts };
  const t0 = process.hrtime.bigint();
  console.log('measure-start');
  await new Promise((r) => setTimeout(r, measureS * 1000));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const delta = Object.fromEntries(Object.keys(counts).map((k) => [k, counts[k] - start[k]]));
  console.log(`measure-end ${JSON.stringify({ ...delta, seconds })}`);
  running = false;
  await Promise.race([Promise.all(all), new Promise((r) => setTimeout(r, 5000))]);
  process.exit(0);
}

async function idleMode(calls) {
  const open = [];
  // Opened 50 at a time: a burst of thousands of connects at once overflows the backlog.
  for (let i = 0; i < calls; i += 50) {
    const batch = Array.from({ length: Math.min(50, calls - i) }, () => openCall());
    open.push(...await Promise.all(batch));
  }
  console.log(`idle-ready ${JSON.stringify({ calls: open.length, errors: counts.errors })}`);
  process.stdin.resume();
  process.stdin.on('end', () => {
    for (const c of open) c.ws.terminate();
    process.exit(0);
  });
}

const nums = rest.map(Number);
if (mode === 'turns') await turnsMode(...nums);
else if (mode === 'idle') await idleMode(...nums);
else { console.error(`unknown mode ${mode}`); process.exit(2); }
