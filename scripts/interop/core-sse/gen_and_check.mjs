// Differential test of harness-core's WHATWG SSE decoder (examples/sse_dump.rs) against
// eventsource-parser 3.1.1 (rexxars; the parser under the Vercel AI SDK, whose
// @ai-sdk/provider-utils asks for ^3.0.8; 4.x needs Node 22.12+): random and hand-written
// byte streams, randomly chunked, through both; every case must give the same events (type,
// data, last event ID at dispatch), the same last event ID and the same reconnection time.
//
//   node gen_and_check.mjs                 # SSE_INTEROP_SEED=N and SSE_INTEROP_CASES=N override
//   SSE_INTEROP_RAW=1 node gen_and_check.mjs   # without the two adjustments below: shows the
//                                              # peer's deviations from the spec
//
// The authority is the HTML standard, "Interpreting an event stream" (§9.2.6). How each side
// is read, and the two places where the peer departs from it:
//
// * Bytes to text. The peer takes strings. The spec decodes the stream with "UTF-8 decode"
//   (U+FFFD for invalid bytes, one leading BOM removed); that is what a streaming TextDecoder
//   does (`stream: true`, default `ignoreBOM: false`), and how the peer is used (bytes
//   piped through a TextDecoderStream into its EventSourceParserStream). So the leading BOM
//   is removed by the TextDecoder, not by the peer: the peer's own BOM check looks for the
//   three characters
//   U+00EF U+00BB U+00BF (a BOM mis-decoded as Latin-1) in its first chunk, never U+FEFF. A
//   second BOM reaches the peer as U+FEFF, part of a field name, as the spec says.
// * Event type: the peer gives `event: undefined` when the type buffer is empty; the spec's
//   type is then "message".
// * Ids: the peer's `event.id` is the `id:` field of that event only (it clears it at every
//   blank line), not the last event ID buffer, which the spec keeps across events. The last
//   event ID at dispatch is rebuilt here the way EventSource polyfills over the peer do: an
//   event with an id sets it, an event without one keeps the previous one. The last event ID
//   of the stream is that of the last dispatch (the spec's "last event ID string", which
//   "dispatch the event" sets; an event cut off at end of stream never sets it).
// * Reconnection time: the peer reports it through onRetry; the last call wins.
// * End of stream: neither side dispatches an unterminated event. The peer's
//   reset({ consume: true }) is not called: it would interpret an unterminated last line as
//   if it had ended (a `retry:` there would count), where the spec says "Once the end of the
//   file is reached, any pending data must be discarded".
//
// Peer deviation 1 (ids not compared for these cases). Spec: "If the field name is "id": If
// the field value does not contain U+0000 NULL, then set the last event ID buffer to the field
// value", and dispatch step 1 copies the buffer into the last event ID string even when "the
// data buffer is an empty string". So `id: 5` in an event without data (`id: 5\n\n`) still
// sets the last event ID that later events carry. The peer drops it: it clears its id at the
// blank line without emitting anything. For a case holding such an event the ids are not
// compared (types, data and retry still are).
//
// Peer deviation 2 (normalised). Spec: "end-of-line = ( cr lf / cr / lf )": a lone CR ends a
// line by itself. The peer keeps a CR that is the last character it has seen, waiting to know
// if an LF follows, and goes on only when a later chunk holds a CR or LF. When the stream's
// last line end is a lone CR, that line (and an event it dispatches, a retry it sets) is
// never interpreted. For such a case the peer is given an LF right after that CR: "\r\n" is
// the same single line end as "\r" for the spec, so the stream means the same.

import { Buffer } from 'node:buffer';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createParser } from 'eventsource-parser';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../../..');
const SEED = Number(process.env.SSE_INTEROP_SEED ?? 20241129) >>> 0;
const CASES = Number(process.env.SSE_INTEROP_CASES ?? 4000);
const RAW = process.env.SSE_INTEROP_RAW === '1';

// mulberry32: small, seeded, deterministic.
let state = SEED;
function rnd() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const chance = (p) => rnd() < p;
const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
function weighted(table) {
  let r = rnd() * table.reduce((s, [w]) => s + w, 0);
  for (const [w, v] of table) if ((r -= w) < 0) return v;
  return table[table.length - 1][1];
}
const b = (s) => Buffer.from(s, 'utf8');
const bytes = (...xs) => Buffer.from(xs);
const BOM = bytes(0xef, 0xbb, 0xbf);

// ---- generating cases ---------------------------------------------------------------------

const TEXT = ['a', 'hello', 'x y', ' ', '  ', '\t', ':', ': ', 'k:v', '{"n":1}', 'é', '€', '😀',
  '中文', '\u{FEFF}', '\u{FFFD}', 'data', 'id: 3', 'retry', '0', '42', '\\n'].map(b);
const INVALID = [[0xff], [0x80], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98],
  [0xc0, 0xaf], [0xf4, 0x90, 0x80, 0x80], [0xfe], [0xef, 0xbb], [0xe0, 0x80]].map((x) => Buffer.from(x));

function text(maxParts = 4) {
  const parts = [];
  for (let i = int(0, maxParts); i > 0; i--) {
    parts.push(weighted([[20, () => pick(TEXT)], [3, () => pick(INVALID)], [1, () => bytes(0)]])());
  }
  return Buffer.concat(parts);
}

const RETRY_VALUES = ['12a', 'a12', '-5', '+5', '1.5', ' 5', '', '1e3', '0x10', '٣', '５', '5 ', '1\u00002']
  .map(b);
const UNKNOWN = ['foo', 'Data', 'DATA', 'data ', ' data', '  data', ' id', 'ids', 'i', 'retry ',
  'Event', '\u{FEFF}data', 'x-data', 'dat', 'events', 'é'].map(b);

// One field line (no line end): `name`, then `:`, `: ` or `:  ` and the value, or no colon.
function field(name, value) {
  const sep = weighted([[10, ': '], [5, ':'], [3, ':  '], [2, null]]);
  return sep === null ? name : Buffer.concat([name, b(sep), value]);
}

function line(kind) {
  switch (kind) {
    case 'data': return field(b('data'), text());
    case 'event': return field(b('event'), weighted([[6, () => b(pick(['add', 'update', 'message', 'ping', 'événement']))],
      [2, () => Buffer.alloc(0)], [2, () => text(2)]])());
    case 'id': return field(b('id'), weighted([[8, () => b(String(int(0, 99999)))], [2, () => Buffer.alloc(0)],
      [2, () => text(2)], [2, () => Buffer.concat([b(String(int(0, 99))), bytes(0), b('1')])]])());
    case 'retry': return field(b('retry'), weighted([[6, () => b('0'.repeat(int(0, 2)) + String(int(0, 999999999)))],
      [5, () => pick(RETRY_VALUES)]])());
    case 'comment': return Buffer.concat([b(':'), text(2)]);
    case 'unknown': return field(pick(UNKNOWN), text(2));
    default: return Buffer.from([...text(3)].filter((x) => x !== 0x3a)); // garbage (no colon: a field without value)
  }
}

const KINDS = [[40, 'data'], [10, 'id'], [10, 'event'], [7, 'retry'], [7, 'comment'], [8, 'unknown'],
  [3, 'garbage']];

function event() {
  const lines = [];
  for (let i = int(0, 5); i > 0; i--) lines.push(line(weighted(KINDS)));
  if (chance(0.85) && !lines.some((l) => l.subarray(0, 4).equals(b('data')))) {
    lines.splice(int(0, lines.length), 0, line('data'));
  }
  return lines;
}

function generate() {
  const lines = []; // every line is followed by a line end, except maybe the last
  for (let i = int(0, 6); i > 0; i--) {
    lines.push(...event(), Buffer.alloc(0));
    if (chance(0.1)) lines.push(Buffer.alloc(0));
  }
  let lastTerminated = true;
  if (chance(0.35)) { // a trailing event, never ended by a blank line
    const tail = event();
    if (tail.length === 0) tail.push(line('data'));
    lines.push(...tail);
    lastTerminated = chance(0.5);
  }
  if (chance(0.05) && lines.length > 0) { // a BOM at the start of a later line: not a BOM there
    const i = int(0, lines.length - 1);
    lines[i] = Buffer.concat([BOM, lines[i]]);
  }
  const style = weighted([[4, 'lf'], [2, 'crlf'], [2, 'cr'], [3, 'mixed']]);
  const ends = { lf: b('\n'), crlf: b('\r\n'), cr: b('\r') };
  const parts = [];
  const start = weighted([[75, null], [15, BOM], [5, Buffer.concat([BOM, BOM])], [3, bytes(0xef, 0xbb)]]);
  if (start) parts.push(start);
  lines.forEach((l, i) => {
    parts.push(l);
    if (i < lines.length - 1 || lastTerminated) {
      parts.push(ends[style === 'mixed' ? pick(['lf', 'crlf', 'cr']) : style]);
    }
  });
  return Buffer.concat(parts);
}

// Cuts the bytes into chunks: favouring a cut after a CR (its LF comes in the next chunk) and
// inside multi-byte characters and the BOM; sometimes one byte per chunk, or empty chunks.
function chunk(buf) {
  const mode = weighted([[1, 'whole'], [1, 'bytes'], [8, 'random']]);
  if (mode === 'whole') return [buf];
  if (mode === 'bytes' && buf.length < 400) return [...buf].map((x) => bytes(x));
  const cuts = new Set();
  for (let i = int(0, Math.ceil(buf.length / 6)); i > 0; i--) cuts.add(int(1, buf.length));
  const afterCr = chance(0.5);
  for (let i = 0; i < buf.length; i++) {
    if (afterCr && buf[i] === 0x0d && chance(0.7)) cuts.add(i + 1);
    if (buf[i] >= 0xc0 && chance(0.5)) cuts.add(i + int(1, 2));
  }
  const sorted = [...cuts].filter((c) => c > 0 && c < buf.length).sort((x, y) => x - y);
  const out = [];
  let prev = 0;
  for (const c of [...sorted, buf.length]) {
    out.push(buf.subarray(prev, c));
    if (chance(0.03)) out.push(Buffer.alloc(0));
    prev = c;
  }
  return out;
}

// ---- hand-written cases -------------------------------------------------------------------

const ev = (data, id = null, event = 'message') => ({ event, data, id });
const FIXED = [
  // The spec's examples (§9.2.6 and §9.2.5).
  { chunks: [b('data: YHOO\ndata: +2\ndata: 10\n\n')], expect: [ev('YHOO\n+2\n10')] },
  { chunks: [b(': test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n')],
    expect: [ev('first event', '1'), ev('second event')] },
  { chunks: [b('data\n\ndata\ndata\n\ndata:')], expect: [ev(''), ev('\n')] },
  { chunks: [b('data:test\n\ndata: test\n\n')], expect: [ev('test'), ev('test')] },
  { chunks: [b('event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n')],
    expect: [ev('73857293', null, 'add'), ev('2153', null, 'remove'), ev('113411', null, 'add')] },
  // CR at the end of one chunk, LF at the start of the next: one line end.
  { chunks: [b('data: a\r'), b('\ndata: b\r\n\r'), b('\n')], expect: [ev('a\nb')] },
  { chunks: [b('data: a\r'), b('\r'), b('\n'), b('data: b\r'), b('\r')], expect: [ev('a'), ev('b')] },
  // BOM split over chunks; two BOMs (the second is part of a field name).
  { chunks: [bytes(0xef), bytes(0xbb, 0xbf), b('data: x\n\n')], expect: [ev('x')] },
  { chunks: [Buffer.concat([BOM, BOM, b('data: x\n\ndata: y\n\n')])], expect: [ev('y')] },
  // A character split over chunks is not replaced; invalid bytes are U+FFFD (maximal subparts).
  { chunks: [b('data: 1'), bytes(0xe2, 0x82), bytes(0xac), b('\n\n')], expect: [ev('1€')] },
  { chunks: [b('data: '), bytes(0xff, 0xc3, 0x41, 0xed, 0xa0, 0x80, 0xf0, 0x9f, 0x98), b('\n\n')],
    expect: [ev('\uFFFD\uFFFDA\uFFFD\uFFFD\uFFFD\uFFFD')] },
  // NUL: an id holding it is ignored; data may hold it.
  { chunks: [b('id: 1\ndata: a\n\nid: 2\u00003\ndata: b\u0000\n\n')], expect: [ev('a', '1'), ev('b\u0000', '1')] },
  // retry: only ASCII digits.
  { chunks: [b('retry: 1000\nretry: 12a\nretry: \nretry: ５\ndata: x\n\n')], expect: [ev('x')], retry: 1000 },
  // An empty event type is "message"; the id persists across events; an empty id clears it.
  { chunks: [b('event: t\nid: 7\ndata: 1\n\nevent:\ndata: 2\n\nid\ndata: 3\n\n')],
    expect: [ev('1', '7', 't'), ev('2', '7'), ev('3')] },
  // One leading space is removed, not two.
  { chunks: [b('data:  two\nevent:  t\n\n')], expect: [ev(' two', null, ' t')] },
  // A lone CR as the last byte ends the line (peer deviation 2).
  { chunks: [b('retry: 5\rdata: x\r\r')], expect: [ev('x')], retry: 5 },
  // An event cut off at end of stream is not dispatched and does not set the last event ID.
  { chunks: [b('id: 1\ndata: a\n\nid: 2\ndata: b')], expect: [ev('a', '1')], lastEventId: '1' },
  { chunks: [b('id: 1\ndata: a\n\nid: 2\ndata: b\n')], expect: [ev('a', '1')], lastEventId: '1' },
];

// ---- the two sides ------------------------------------------------------------------------

function peer(chunks) {
  const events = [];
  let lastEventId = null;
  let retry = null;
  const parser = createParser({
    onEvent(e) {
      if (typeof e.id === 'string') lastEventId = e.id === '' ? null : e.id;
      events.push({ event: e.event ?? 'message', data: e.data, id: lastEventId });
    },
    onRetry(ms) { retry = ms; },
  });
  const decoder = new TextDecoder('utf-8');
  for (const c of chunks) {
    const s = decoder.decode(c, { stream: true });
    if (s !== '') parser.feed(s);
  }
  const rest = decoder.decode();
  if (rest !== '') parser.feed(rest);
  return { events, last_event_id: lastEventId, retry };
}

// Deviation 1: an `id` field (without NUL) in an event that a blank line ends without data.
// Read from the text the way the spec reads it; only used to decide what is compared.
function idInEventWithoutData(buf) {
  const lines = new TextDecoder().decode(buf).split(/\r\n|\r|\n/);
  lines.pop(); // not a complete line
  let data = false;
  let id = false;
  for (const l of lines) {
    if (l === '') {
      if (id && !data) return true;
      data = id = false;
      continue;
    }
    const colon = l.indexOf(':');
    if (colon === 0) continue;
    const name = colon < 0 ? l : l.slice(0, colon);
    const value = colon < 0 ? '' : l.slice(colon + (l[colon + 1] === ' ' ? 2 : 1));
    if (name === 'data') data = true;
    if (name === 'id' && !value.includes('\0')) id = true;
  }
  return false;
}

// Deviation 2: when the last line end is a lone CR, the peer gets an LF after it.
function peerChunks(chunks) {
  const all = Buffer.concat(chunks);
  let last = all.length - 1;
  while (last >= 0 && all[last] !== 0x0a && all[last] !== 0x0d) last--;
  if (last < 0 || all[last] !== 0x0d) return null;
  let offset = last;
  return chunks.map((c) => {
    const at = offset;
    offset -= c.length;
    return at >= 0 && at < c.length ? Buffer.concat([c.subarray(0, at + 1), b('\n'), c.subarray(at + 1)]) : c;
  });
}

// ---- run ----------------------------------------------------------------------------------

console.log(`core-sse interop: eventsource-parser vs SseDecoder, seed ${SEED} (SSE_INTEROP_SEED), `
  + `${FIXED.length} fixed + ${CASES} random cases${RAW ? ', RAW (no adjustments)' : ''}`);
const cases = FIXED.map((f, id) => ({ id, chunks: f.chunks, fixed: f }));
for (let i = 0; i < CASES; i++) cases.push({ id: cases.length, chunks: chunk(generate()) });

const casesPath = join(here, 'cases.jsonl');
writeFileSync(casesPath, cases.map((c) => JSON.stringify({ id: c.id, chunks: c.chunks.map((x) => x.toString('base64')) })).join('\n') + '\n');
const ours = execFileSync('cargo', ['run', '-q', '--example', 'sse_dump', '--', casesPath],
  { cwd: root, maxBuffer: 1 << 30, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  .trim().split('\n').map((l) => JSON.parse(l))
  // serde_json writes keys in alphabetical order: put them in the order the peer's are in.
  .map((r) => ({ ...r, events: r.events.map((e) => ('error' in e ? e : { event: e.event, data: e.data, id: e.id })) }));
if (ours.length !== cases.length) {
  console.error(`FAIL: sse_dump printed ${ours.length} results for ${cases.length} cases`);
  process.exit(1);
}

// How often the tricky inputs occur, so a change to the generator cannot quietly lose them.
const coverage = { crThenLfInNextChunk: 0, charSplitOverChunks: 0, bomAtStart: 0, invalidUtf8: 0 };
const strict = new TextDecoder('utf-8', { fatal: true });
function count(chunks) {
  const nonEmpty = chunks.filter((x) => x.length > 0);
  const pairs = nonEmpty.slice(1).map((next, i) => [nonEmpty[i], next]);
  if (pairs.some(([a, z]) => a[a.length - 1] === 0x0d && z[0] === 0x0a)) coverage.crThenLfInNextChunk++;
  if (pairs.some(([a, z]) => a[a.length - 1] >= 0xc0 && z[0] >= 0x80 && z[0] < 0xc0)) coverage.charSplitOverChunks++;
  const all = Buffer.concat(chunks);
  if (all.subarray(0, 3).equals(BOM)) coverage.bomAtStart++;
  try { strict.decode(all); } catch { coverage.invalidUtf8++; }
}

const stats = { events: 0, idsNotCompared: 0, crNormalised: 0 };
const failures = [];
for (const [i, c] of cases.entries()) {
  count(c.chunks);
  const mine = ours[i];
  const normalised = RAW ? null : peerChunks(c.chunks);
  if (normalised) stats.crNormalised++;
  const theirs = peer(normalised ?? c.chunks);
  const compareIds = RAW || !idInEventWithoutData(Buffer.concat(c.chunks));
  if (!compareIds) stats.idsNotCompared++;
  const view = (r) => JSON.stringify({
    events: r.events.map((e) => (compareIds ? e : { ...e, id: '(not compared)' })),
    last_event_id: compareIds ? r.last_event_id : '(not compared)',
    retry: r.retry,
  });
  const why = [];
  if (mine.id !== c.id) why.push(`sse_dump answered case ${mine.id}`);
  if (view(mine) !== view(theirs)) why.push('peer and SseDecoder differ');
  if (c.fixed) { // the spec's answer, where written down
    const want = { events: c.fixed.expect, last_event_id: c.fixed.lastEventId ?? mine.last_event_id, retry: c.fixed.retry ?? null };
    if (JSON.stringify({ events: mine.events, last_event_id: mine.last_event_id, retry: mine.retry }) !== JSON.stringify(want)) {
      why.push(`SseDecoder differs from the spec's answer ${JSON.stringify(want)}`);
    }
  }
  stats.events += mine.events.length;
  if (why.length) failures.push({ c, why, mine, theirs, normalised });
}

for (const { c, why, mine, theirs, normalised } of failures.slice(0, 5)) {
  console.log(`\nMISMATCH case ${c.id}${c.fixed ? ' (fixed)' : ''}: ${why.join('; ')}`);
  console.log(`  chunks (base64): ${JSON.stringify(c.chunks.map((x) => x.toString('base64')))}`);
  console.log(`  bytes: ${JSON.stringify(Buffer.concat(c.chunks).toString('latin1'))}`);
  if (normalised) console.log('  (the peer was given an LF after the final lone CR)');
  console.log(`  SseDecoder:         ${JSON.stringify({ events: mine.events, last_event_id: mine.last_event_id, retry: mine.retry })}`);
  console.log(`  eventsource-parser: ${JSON.stringify(theirs)}`);
}
console.log(`\n${cases.length} cases, ${stats.events} events; ids not compared in ${stats.idsNotCompared} `
  + `(peer deviation 1), LF added after a final CR for the peer in ${stats.crNormalised} (deviation 2)`);
console.log(`cases with: ${Object.entries(coverage).map(([k, n]) => `${k} ${n}`).join(', ')}`);
if (failures.length) {
  console.log(`FAIL: ${failures.length} of ${cases.length} cases differ (seed ${SEED})`);
  process.exit(1);
}
console.log('core-sse interop: all passed');
