// The real llmrtc backend (@llmrtc/llmrtc-backend, pinned in package.json) with small offline
// stand-in providers, for our client to talk to. Nothing leaves 127.0.0.1: no cloud keys,
// no ICE server lookups (the ICE list is one loopback STUN address).
//
// Stand-ins:
//  - STT: every utterance is "hello number N" (N counts this process's utterances);
//  - LLM: streams "You said: <last user text>. I remember M messages." word by word, where M
//    is the number of user and assistant messages the backend handed it (so a reply shows
//    whether a session's history survived a reconnect);
//  - TTS: 24 kHz 16-bit PCM, 100 ms of tone per word, streamed.
//
// usage: node llmrtc_backend.mjs PORT [whole-tts]   (0: any free port; `whole-tts` turns
// the backend's streamingTTS off, so each reply's audio comes in one `tts` message)
// Prints `listening <port>` once it accepts connections, and stops (exit 0) when its stdin
// closes or on SIGTERM.

import { LLMRTCServer } from '@llmrtc/llmrtc-backend';
import { fail } from './llmrtc_common.mjs';

const port = Number(process.argv[2] ?? '0');
const wholeTts = process.argv[3] === 'whole-tts';
if (!Number.isInteger(port) || port < 0 || port > 65535 || (process.argv[3] && !wholeTts)) {
  fail('usage: node llmrtc_backend.mjs PORT [whole-tts]');
}

// The backend logs every step; only our own lines go to stdout.
const out = console.log.bind(console);
console.log = () => {};
console.info = () => {};
console.warn = () => {};

let utterances = 0;
const stt = {
  name: 'stand-in-stt',
  async transcribe(audio) {
    if (!Buffer.isBuffer(audio) || audio.length === 0) throw new Error('no audio');
    utterances += 1;
    return { text: `hello number ${utterances}`, isFinal: true };
  },
};

function replyText(request) {
  const said = request.messages.filter((m) => m.role === 'user' || m.role === 'assistant');
  const last = [...said].reverse().find((m) => m.role === 'user');
  const text = last ? String(last.content) : '';
  return `You said: ${text}. I remember ${said.length} messages.`;
}

const llm = {
  name: 'stand-in-llm',
  async complete(request) {
    return { fullText: replyText(request), stopReason: 'end_turn' };
  },
  async *stream(request) {
    const words = replyText(request).split(' ');
    for (let i = 0; i < words.length; i++) {
      const last = i === words.length - 1;
      yield { content: (i === 0 ? '' : ' ') + words[i], done: last, ...(last ? { stopReason: 'end_turn' } : {}) };
    }
  },
};

const RATE = 24000;
function tone(ms) {
  const n = Math.round((RATE * ms) / 1000);
  const b = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(4000 * Math.sin((2 * Math.PI * 220 * i) / RATE)), i * 2);
  return b;
}
const tts = {
  name: 'stand-in-tts',
  pcmSampleRate: RATE,
  async speak(text) {
    return { audio: tone(100 * text.split(/\s+/).length), format: 'pcm' };
  },
  async *speakStream(text) {
    for (const _word of text.split(/\s+/).filter(Boolean)) yield tone(100);
  },
};

const server = new LLMRTCServer({
  providers: { stt, llm, tts },
  host: '127.0.0.1',
  port,
  iceServers: [{ urls: 'stun:127.0.0.1:3478' }],
  streamingTTS: !wholeTts,
  systemPrompt: 'You are a stand-in.',
});

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  try {
    await server.stop();
  } finally {
    process.exit(0);
  }
}
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();

await server.start();
const address = server.getServer()?.address();
if (!address || typeof address !== 'object') fail('the backend did not report its address');
out(`listening ${address.port}`);
