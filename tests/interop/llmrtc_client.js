// Interop client for the llmrtc reference server: a plain `ws` (npm) client, like the
// browser web client's signalling socket, drives ready, ping, an audio turn and reconnect,
// and checks every message's fields against the spec.
//
// usage: AGENTWIRE_NODE_WS_DIR=<dir with node_modules/ws> node llmrtc_client.js ws://127.0.0.1:PORT/
'use strict';

const path = require('path');
const dir = process.env.AGENTWIRE_NODE_WS_DIR;
if (!dir) {
  console.error('AGENTWIRE_NODE_WS_DIR is unset (npm install --prefix <dir> ws@8)');
  process.exit(2);
}
const WebSocket = require(path.join(dir, 'node_modules', 'ws'));
const url = process.argv[2];

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}
function check(cond, msg) {
  if (!cond) fail(msg);
}
function keys(m) {
  return Object.keys(m).sort().join(',');
}
function exactKeys(m, want) {
  check(keys(m) === want.slice().sort().join(','), `${m.type}: keys ${keys(m)}, want ${want}`);
}
function isBase64(s) {
  return typeof s === 'string' && s.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(s);
}

// A connection with an inbox: next() resolves with the next JSON message (10 s bound).
function open() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const inbox = [];
    const waiters = [];
    ws.on('message', (data, isBinary) => {
      check(!isBinary, 'server messages are text frames');
      let m;
      try {
        m = JSON.parse(data.toString('utf8'));
      } catch (e) {
        fail('not JSON: ' + data);
      }
      if (waiters.length) waiters.shift()(m);
      else inbox.push(m);
    });
    ws.on('error', reject);
    ws.on('open', () => {
      const conn = {
        ws,
        send: (m) => ws.send(JSON.stringify(m)),
        next: (what) =>
          new Promise((res) => {
            if (inbox.length) return res(inbox.shift());
            const t = setTimeout(() => fail('timed out waiting for ' + what), 10000);
            waiters.push((m) => {
              clearTimeout(t);
              res(m);
            });
          }),
        close: () =>
          new Promise((res) => {
            ws.once('close', res);
            ws.close(1000);
          }),
      };
      resolve(conn);
    });
  });
}

async function ready(conn) {
  const m = await conn.next('ready');
  check(m.type === 'ready', 'first message is ready, got ' + m.type);
  check(typeof m.id === 'string' && m.id.length > 0, 'ready.id is a non-empty string');
  check(m.protocolVersion === 1, 'ready.protocolVersion is the number 1');
  if ('iceServers' in m) check(Array.isArray(m.iceServers), 'ready.iceServers is an array');
  check(m.mode === 'pipeline', "ready.mode is 'pipeline' (core 1.3.0)");
  for (const k of Object.keys(m)) {
    check(['type', 'id', 'protocolVersion', 'iceServers', 'mode'].includes(k), 'ready has no field ' + k);
  }
  return m.id;
}

async function main() {
  // The utterance the other llmrtc interop scripts send (an ES module, so imported here).
  const { utteranceWav } = await import('./llmrtc_common.mjs');

  // 1. ready first.
  const a = await open();
  const session = await ready(a);
  console.log('ready ok: session ' + session);

  // 2. ping -> pong echoing the timestamp (a number).
  const ts = Date.now();
  a.send({ type: 'ping', timestamp: ts });
  const pong = await a.next('pong');
  exactKeys(pong, ['type', 'timestamp']);
  check(pong.type === 'pong' && pong.timestamp === ts, 'pong echoes the timestamp');
  console.log('ping/pong ok');

  // An unknown type is ignored: the next message is the audio turn's first.
  a.send({ type: 'hello-from-node', x: 1 });

  // 3. an audio turn.
  a.send({ type: 'audio', data: utteranceWav().toString('base64') });
  let m = await a.next('speech-start');
  check(m.type === 'speech-start', 'speech-start first, got ' + JSON.stringify(m));
  exactKeys(m, ['type']);
  m = await a.next('speech-end');
  check(m.type === 'speech-end', 'then speech-end, got ' + m.type);
  exactKeys(m, ['type']);
  // Partial transcripts (isFinal: false), each a longer prefix, then the final one.
  let partials = 0;
  let previous = '';
  for (;;) {
    m = await a.next('transcript');
    check(m.type === 'transcript', 'then transcript, got ' + m.type);
    exactKeys(m, ['type', 'text', 'isFinal']);
    check(typeof m.text === 'string' && m.text.length > previous.length, 'a longer transcript: ' + m.text);
    previous = m.text;
    if (m.isFinal === true) break;
    check(m.isFinal === false, 'isFinal is a boolean');
    partials++;
  }
  check(partials > 0, 'partial transcripts before the final one');
  let streamed = '';
  for (;;) {
    m = await a.next('llm-chunk');
    check(m.type === 'llm-chunk', 'llm-chunk, got ' + m.type);
    exactKeys(m, ['type', 'content', 'done']);
    check(typeof m.content === 'string' && typeof m.done === 'boolean', 'llm-chunk fields');
    streamed += m.content;
    if (m.done) break;
  }
  m = await a.next('llm');
  exactKeys(m, ['type', 'text']);
  check(m.type === 'llm' && m.text === streamed, 'llm text equals the streamed chunks');
  m = await a.next('tts-start');
  check(m.type === 'tts-start', 'tts-start, got ' + m.type);
  exactKeys(m, ['type']);
  let chunks = 0;
  for (;;) {
    m = await a.next('tts-chunk or tts-complete');
    if (m.type === 'tts-complete') {
      exactKeys(m, ['type']);
      break;
    }
    check(m.type === 'tts-chunk', 'tts-chunk, got ' + m.type);
    exactKeys(m, ['type', 'format', 'sampleRate', 'data']);
    check(m.format === 'pcm' && m.sampleRate === 24000 && isBase64(m.data), 'tts-chunk fields');
    chunks++;
  }
  check(chunks > 0, 'some tts audio');
  console.log(`audio turn ok: "${streamed}" and ${chunks} tts chunks`);

  // 4. reconnect with the session id on a new connection: history recovered.
  await a.close();
  const b = await open();
  const second = await ready(b);
  check(second !== session, 'a new connection gets a new ready.id');
  b.send({ type: 'reconnect', sessionId: session });
  m = await b.next('reconnect-ack');
  exactKeys(m, ['type', 'success', 'sessionId', 'historyRecovered']);
  check(m.type === 'reconnect-ack' && m.success === true && m.sessionId === session && m.historyRecovered === true,
    'reconnect-ack recovers the session: ' + JSON.stringify(m));
  console.log('reconnect ok');

  // An unknown session: success false with the current ready.id, then SESSION_NOT_FOUND.
  const c = await open();
  const third = await ready(c);
  c.send({ type: 'reconnect', sessionId: 'no-such-session' });
  m = await c.next('reconnect-ack');
  check(m.type === 'reconnect-ack' && m.success === false && m.sessionId === third && m.historyRecovered === false,
    'unknown session: ' + JSON.stringify(m));
  m = await c.next('error');
  exactKeys(m, ['type', 'code', 'message']);
  check(m.type === 'error' && m.code === 'SESSION_NOT_FOUND' && typeof m.message === 'string', 'SESSION_NOT_FOUND');
  console.log('unknown session ok');

  await b.close();
  await c.close();
  console.log('node interop ok');
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
