// The spec's "A minimal harness without the SDK", as written there, with a scripted model
// in place of OpenAI (streams OpenAI chat.completion.chunk objects word by word, a word every
// CHUNK_DELAY_MS, default 15; scripts/load/jambonz_vs_node.py sets 0).
import { WebSocketServer } from 'ws';

const delay = Number(process.env.CHUNK_DELAY_MS ?? 15);

const model = {
  chat: {
    completions: {
      async create({ messages }) {
        const last = messages[messages.length - 1].content;
        const text = last === '(call connected)' ? 'Thanks for calling Acme.'
          : /open|hours/i.test(last) ? "We're open eight to six on weekdays."
          : 'Goodbye.';
        const words = text.match(/\S+\s*/g);
        return (async function* () {
          for (const [i, w] of words.entries()) {
            if (delay > 0) await new Promise((r) => setTimeout(r, delay));
            yield { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'scripted',
              choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: w } : { content: w }, logprobs: null, finish_reason: null }] };
          }
        })();
      },
    },
  },
};

const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: () => 'harness.jambonz.org' });
wss.on('listening', () => console.log(`ws://127.0.0.1:${wss.address().port}`));
wss.on('connection', (ws) => {
  const history = [];
  const replies = new Map();                      // reply_id → its assistant message
  const send = (type, data) => ws.send(JSON.stringify({ type, ...data }));
  let current;                                    // the turn being worked on
  ws.on('message', async (raw) => {
    const msg = JSON.parse(raw);
    switch (msg.type) {
      case 'session:start':
        history.push({ role: 'system', content: `You answer calls for Acme. Caller: ${msg.from}.` });
        break;
      case 'turn:start': {
        current = msg.turn_id;
        const text = msg.input.type === 'speech' ? msg.input.text : '(call connected)';
        history.push({ role: 'user', content: text });
        const reply_id = `r${msg.turn_id}`;
        const said = { role: 'assistant', content: '' };
        const stream = await model.chat.completions.create({ model: 'gpt-4.1-mini', messages: history, stream: true });
        history.push(said);                       // filled in as it streams
        replies.set(reply_id, said);
        for await (const chunk of stream) {
          if (current !== msg.turn_id) return;    // cancelled: stop
          said.content += chunk.choices[0]?.delta?.content ?? '';
          send('reply:chunk', { reply_id, turn_id: msg.turn_id, chunk });
        }
        send('reply:done', { reply_id, turn_id: msg.turn_id, turn_record: { model_calls: 1 } });
        break;
      }
      case 'turn:cancel':
        if (current === msg.turn_id) current = undefined;
        break;
      case 'event':
        if (msg.name === 'user_interruption') {   // keep only what the caller heard
          const said = replies.get(msg.reply_id);
          if (said) said.content = msg.spoken;
        }
        break;
    }
  });
});
