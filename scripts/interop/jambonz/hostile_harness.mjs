// A misbehaving harness for probing jambonz_call (the simulator over a real socket).
// usage: node hostile_harness.mjs MODE   (prints ws://127.0.0.1:PORT on its first line)
// Without a mode's misbehaviour it answers like the spec's whole call: greeting, get_hours,
// a reply, hangup on "bye".
import { WebSocketServer } from 'ws';
import net from 'node:net';

const mode = process.argv[2] ?? 'good';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const chunk = (text, extra = {}) => ({ choices: [{ index: 0, delta: { content: text, ...extra } }] });

if (mode === 'tcp_silent') {
  // Accepts TCP, never answers the upgrade.
  const srv = net.createServer(() => {});
  srv.listen(0, '127.0.0.1', () => console.log(`ws://127.0.0.1:${srv.address().port}`));
} else {
  const protocols = mode === 'no_subprotocol' ? () => false
    : mode === 'wrong_subprotocol' ? () => 'nope' : () => 'harness.jambonz.org';
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: protocols, maxPayload: 1 << 30 });
  wss.on('listening', () => console.log(`ws://127.0.0.1:${wss.address().port}`));
  wss.on('connection', (ws) => serve(ws));
}

function serve(ws) {
  let n = 0;
  const id = (p) => `${p}${++n}`;
  const send = (type, data) => { if (ws.readyState === 1) ws.send(JSON.stringify({ type, ...data })); };
  const raw = (s) => { if (ws.readyState === 1) ws.send(s); };
  const reply = async (turn_id, text, opts = {}) => {
    const reply_id = opts.reply_id ?? id('r');
    const words = text.match(/\S+\s*/g);
    for (const [i, w] of words.entries()) {
      const c = { reply_id, chunk: chunk(w) };
      if (turn_id !== undefined) c.turn_id = turn_id;
      if (opts.interruptAt === i) c.interrupt = true;
      send('reply:chunk', c);
      await sleep(opts.gap ?? 10);
    }
    if (opts.noDone) return reply_id;
    const d = { reply_id };
    if (turn_id !== undefined) d.turn_id = turn_id;
    if ('record' in opts) d.turn_record = opts.record; else d.turn_record = { route: 'chat' };
    send('reply:done', d);
    return reply_id;
  };
  const toolWait = new Map();
  const tool = (turn_id, name, args) => new Promise((res) => {
    const call_id = id('t');
    toolWait.set(call_id, res);
    send('tool:call', { call_id, turn_id, name, args });
  });
  const cmdWait = new Map();
  const command = (name, args) => new Promise((res) => {
    const command_id = id('c');
    cmdWait.set(command_id, res);
    send('command', { command_id, name, args });
  });
  const log = (...a) => console.log('[harness]', ...a);

  let cancelled = new Set();
  const normalTurn = async (msg) => {
    const t = msg.turn_id;
    if (msg.input.type === 'greeting') return reply(t, 'Thanks for calling Acme.');
    const text = msg.input.text ?? '';
    if (/bye/i.test(text)) {
      const r = await command('hangup', { reason: 'resolved' });
      log('hangup result', JSON.stringify(r));
      return;
    }
    const r = await tool(t, 'get_hours', {});
    log('tool result', JSON.stringify(r));
    if (cancelled.has(t)) return;
    return reply(t, "We're open eight to six on weekdays.", { gap: 40 });
  };

  const handlers = {
    good: {},
    early: { // a reply for turn 2 on its speech:start, before its turn:start
      'speech:start': (m) => reply(m.turn_id, 'Too early.'),
    },
    unknown_turn: {
      'turn:start': async (m) => { await reply(99, 'For nobody.'); return normalTurn(m); },
    },
    two_replies: { // two replies at once for the greeting: the second queues
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        const a = reply(m.turn_id, 'First reply here.', { reply_id: 'ra' });
        const b = reply(m.turn_id, 'Second reply here.', { reply_id: 'rb' });
        await Promise.all([a, b]);
      },
    },
    unprompted: { // while the greeting plays, three unprompted replies
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        await reply(m.turn_id, 'Thanks for calling Acme, how can I help you today?');
        await reply(undefined, 'Unprompted one.', { reply_id: 'u1' });
        await reply(undefined, 'Unprompted two.', { reply_id: 'u2' });
        await reply(undefined, 'Unprompted three.', { reply_id: 'u3' });
      },
    },
    interrupt_later: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        return reply(m.turn_id, 'Thanks for calling Acme.', { interruptAt: 2 });
      },
    },
    interrupt_midutterance: { // the caller starts speaking: an interrupting unprompted reply
      'speech:start': () => reply(undefined, 'I interrupt you now.', { interruptAt: 0, reply_id: 'ix' + n }),
    },
    interrupt_playing: { // greeting plays, then an unprompted reply with interrupt
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        await reply(m.turn_id, 'Thanks for calling Acme, how can I help you today?');
        await sleep(300);
        await reply(undefined, 'Sorry, one thing first.', { interruptAt: 0 });
      },
    },
    tool_calls_in_chunk: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        send('reply:chunk', { reply_id: 'rt', turn_id: m.turn_id, chunk: chunk('Hello.', { tool_calls: [{ index: 0, id: 'x', function: { name: 'get_hours', arguments: '{}' } }] }) });
        send('reply:done', { reply_id: 'rt', turn_id: m.turn_id });
      },
    },
    big_record: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        return reply(m.turn_id, 'Thanks for calling Acme.', { record: { note: 'x'.repeat(17000) } });
      },
    },
    record_string: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        return reply(m.turn_id, 'Thanks for calling Acme.', { record: 'not an object' });
      },
    },
    record_array: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        return reply(m.turn_id, 'Thanks for calling Acme.', { record: [1, 2] });
      },
    },
    record_null: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        return reply(m.turn_id, 'Thanks for calling Acme.', { record: null });
      },
    },
    record_badfields: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        return reply(m.turn_id, 'Thanks for calling Acme.', { record: { route: 5, steps: 'no', model_calls: [{ ms: 'x' }] } });
      },
    },
    unknown_tool: {
      'turn:start': async (m) => {
        if (m.input.type === 'speech' && !/bye/i.test(m.input.text)) {
          const r = await tool(m.turn_id, 'no_such_tool', {});
          log('unknown tool result', JSON.stringify(r));
        }
        return normalTurn(m);
      },
    },
    bad_args: {
      'turn:start': async (m) => {
        if (m.input.type === 'speech' && !/bye/i.test(m.input.text)) {
          for (const args of ['a string', [1, 2], null, 5]) {
            const r = await tool(m.turn_id, 'get_hours', args);
            log('bad args', JSON.stringify(args), '->', JSON.stringify(r));
          }
          send('tool:call', { call_id: 'noargs', turn_id: m.turn_id, name: 'get_hours' });
          send('tool:call', { call_id: 'noname', turn_id: m.turn_id, args: {} });
        }
        return normalTurn(m);
      },
    },
    hangup_now: {
      'turn:start': async (m) => { const r = await command('hangup', {}); log('hangup', JSON.stringify(r)); },
    },
    commands: {
      'turn:start': async (m) => {
        if (m.input.type === 'greeting') {
          for (const [name, args] of [['play', { url: 'x.wav' }], ['listen', { hints: ['a'] }], ['dance', {}], ['transfer', { to: '+1555' }]]) {
            const r = await command(name, args);
            log('command', name, '->', JSON.stringify(r));
          }
          send('command', { command_id: 'noargs', name: 'play' });
          send('command', { command_id: 'noname' });
        }
        return normalTurn(m);
      },
    },
    silent: { 'turn:start': () => {} },
    no_done: {
      'turn:start': async (m) => { await reply(m.turn_id, 'Thanks for calling.', { noDone: true }); },
    },
    unprompted_no_done: { // an unprompted reply that never finishes, on a free floor
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        await reply(m.turn_id, 'Hi.');
        await sleep(300);
        await reply(undefined, 'And another thing', { noDone: true });
      },
    },
    garbage: {
      'session:start': async () => {
        ws.send(Buffer.from([1, 2, 3]));
        raw('{not json');
        raw('');
        raw('null');
        raw('[]');
        raw('"reply:chunk"');
        raw('{"no":"type"}');
        raw('{"type":5}');
        raw('{"type":"reply:chunk"}');
        raw('{"type":"reply:chunk","reply_id":"g1","turn_id":"1","chunk":{}}');
        raw('{"type":"reply:chunk","reply_id":"g2","turn_id":-1,"chunk":{}}');
        raw('{"type":"reply:chunk","reply_id":"g3","turn_id":1.5,"chunk":{}}');
        raw('{"type":"reply:chunk","reply_id":"g4","turn_id":1e30,"chunk":{}}');
        raw('{"type":"reply:chunk","reply_id":5,"chunk":{}}');
        raw('{"type":"reply:chunk","reply_id":"g5","chunk":"text"}');
        raw('{"type":"reply:chunk","reply_id":"g6","chunk":{"choices":"x"}}');
        raw('{"type":"reply:chunk","reply_id":"g7","chunk":{"choices":[{"delta":{"content":5}}]}}');
        raw('{"type":"brand:new","x":1}');
        raw('{"type":"event","name":"x"}');
        raw('{"type":"session:start"}');
        raw(JSON.stringify({ type: 'future', pad: 'x'.repeat(2 * 1024 * 1024) }));
        raw('{"type":"reply:done","reply_id":"g8","turn_id":1,"type":"reply:chunk"}');
      },
    },
    close_mid_turn: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        send('reply:chunk', { reply_id: 'rc', turn_id: m.turn_id, chunk: chunk('Thanks for') });
        await sleep(100);
        ws.close(1011, 'oops');
      },
    },
    terminate_mid_turn: {
      'turn:start': async (m) => {
        send('reply:chunk', { reply_id: 'rc', turn_id: m.turn_id, chunk: chunk('Thanks for') });
        await sleep(100);
        ws.terminate();
      },
    },
    close_4000: { 'session:start': () => ws.close(4000, 'protocol not supported') },
    mute: { 'session:start': () => {}, 'turn:start': () => {} },
    after_cancel: { // keeps talking for a cancelled turn
      'turn:cancel': async (m) => {
        await reply(m.turn_id, 'Still talking after cancel.');
        send('tool:call', { call_id: 'late', turn_id: m.turn_id, name: 'get_hours', args: {} });
      },
    },
    dup_ids: {
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        await reply(m.turn_id, 'Thanks for calling Acme.', { reply_id: 'same' });
        await reply(undefined, 'Again.', { reply_id: 'same' });
      },
    },
    done_only: { // reply:done without chunks (empty reply)
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        send('reply:done', { reply_id: 'empty', turn_id: m.turn_id });
      },
    },
    empty_chunks: { // chunks with no content at all, then done
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        send('reply:chunk', { reply_id: 'e', turn_id: m.turn_id, chunk: { choices: [] } });
        send('reply:done', { reply_id: 'e', turn_id: m.turn_id });
      },
    },
    ping_flood: {
      'session:start': () => { for (let i = 0; i < 1000; i++) ws.ping(); },
    },
    flood: { // many small frames fast
      'turn:start': async (m) => {
        if (m.input.type !== 'greeting') return normalTurn(m);
        for (let i = 0; i < 20000; i++) send('reply:chunk', { reply_id: 'f', turn_id: m.turn_id, chunk: chunk('a ') });
        send('reply:done', { reply_id: 'f', turn_id: m.turn_id });
      },
    },
    after_end: {
      'session:end': () => { send('reply:chunk', { reply_id: 'z', chunk: chunk('hello?') }); },
    },
    no_close_reply: { // never completes the close handshake
      'session:end': () => { ws._socket.pause(); },
    },
  };
  const h = handlers[mode];
  if (!h) { console.error(`unknown mode ${mode}`); process.exit(2); }
  ws.on('message', async (data, isBinary) => {
    const msg = JSON.parse(data.toString());
    if (msg.type === 'tool:result') { toolWait.get(msg.call_id)?.(msg); return; }
    if (msg.type === 'command:result') { cmdWait.get(msg.command_id)?.(msg); return; }
    if (msg.type === 'turn:cancel') cancelled.add(msg.turn_id);
    const f = h[msg.type] ?? (msg.type === 'turn:start' ? normalTurn : undefined);
    if (f) await f(msg);
  });
}
