// The real llmrtc web client (@llmrtc/llmrtc-web-client, pinned in package.json) in Node
// against our llmrtc server, over the WebSocket path.
//
// Node has no browser globals, so this script gives the client what a browser gives it:
// `WebSocket` is the `ws` package, and the WebRTC classes come from `@roamhq/wrtc` (the
// client builds an RTCPeerConnection and sends an `offer` after `ready`; our server has no
// WebRTC and answers `error WEBRTC_UNAVAILABLE`). ICE servers are one loopback STUN address
// so that the client never falls back to its default public STUN server: nothing here
// leaves 127.0.0.1.
//
// Modes (each step prints one line; any failure prints `FAIL: ...` and exits 1):
//  `ready`: 20 fresh clients, one after another, must each catch `ready` (the client builds
//     its peer connection only after `ready`, so that construction is the proof). `ws`
//     delivers a frame that shares a TCP read with the HTTP 101 before the client has
//     attached its `ready` listener; our server holds its first frame to avoid that.
//  `session`: an audio turn through the fallback (`sendAudio(wav)` over the WebSocket; the
//     client emits transcript..., llmChunk..., llm, ttsStart, ttsChunk..., ttsComplete), then a
//     reconnect: with no peer the client gives up after its 30 s peer-connection timeout and
//     reconnects, resumes the session (`reconnected(true)`, same session id), and a second
//     turn runs in it. Transcripts: partial ones (isFinal false), then one final one.
//  `whole-tts`: against a server with streaming TTS off, one turn whose reply comes as the
//     client's `tts` event (one WAV file at 24 kHz) between ttsStart and ttsComplete, with
//     no ttsChunk.
//
// usage: node llmrtc_web_client.mjs ready|session|whole-tts ws://127.0.0.1:PORT/
// `session` prints `session <id>` (for the caller to check the server's history); both end
// with `web client interop ok`.

import WebSocket from 'ws';
import wrtc from '@roamhq/wrtc';
import { LLMRTCWebClient } from '@llmrtc/llmrtc-web-client';
import { browserGlobals, check, fail, once, utteranceWav, within } from './llmrtc_common.mjs';

const [mode, url] = process.argv.slice(2);
if (!['ready', 'session', 'whole-tts'].includes(mode) || !url) {
  fail('usage: node llmrtc_web_client.mjs ready|session|whole-tts ws://127.0.0.1:PORT/');
}

// Peer connections the client builds, in order; `nextPeer()` resolves with the next one.
const peers = [];
const peerWaiters = [];
class ObservedPeerConnection extends wrtc.RTCPeerConnection {
  constructor(config) {
    super(config);
    if (peerWaiters.length) peerWaiters.shift()(this);
    else peers.push(this);
  }
}
function nextPeer() {
  return new Promise((resolve) => {
    if (peers.length) resolve(peers.shift());
    else peerWaiters.push(resolve);
  });
}

// The client's console.error lines still reach stderr, which the test shows when it fails.
const log = browserGlobals(wrtc, WebSocket, ObservedPeerConnection);

const ICE = [{ urls: 'stun:127.0.0.1:3478' }];

function newClient(reconnection) {
  return new LLMRTCWebClient({ signallingUrl: url, iceServers: ICE, reconnection });
}

/** Resolves 'ready' when the client built its peer (it caught ready), 'failed' if start() failed first. */
function readyOrFailure(client) {
  const started = client.start().then(
    () => 'started',
    (e) => `start() failed: ${e && e.message}`,
  );
  return Promise.race([nextPeer().then(() => 'ready'), started]);
}

async function readyOnEveryConnection(n) {
  for (let i = 1; i <= n; i++) {
    const client = newClient({ enabled: false });
    const outcome = await within(`ready on connection ${i}`, 20000, readyOrFailure(client));
    if (outcome !== 'ready') {
      fail(`connection ${i} of ${n} missed ready (${outcome})`);
    }
    check(typeof client.currentSessionId === 'string' && client.currentSessionId.length > 0,
      `connection ${i}: the client took the session id from ready`);
    client.close();
  }
  log(`ready caught on ${n} of ${n} connections`);
}

/** Sends one utterance over the WebSocket and collects the client's events up to ttsComplete. */
async function fallbackTurn(client, label) {
  const seen = { transcripts: [], chunks: [], llm: null, ttsStart: 0, ttsBytes: 0, rates: new Set(), formats: new Set() };
  const on = {
    transcript: (text, isFinal) => seen.transcripts.push({ text, isFinal }),
    llmChunk: (c) => seen.chunks.push(c),
    llm: (t) => { seen.llm = t; },
    ttsStart: () => { seen.ttsStart++; },
    ttsChunk: (audio, format, rate) => {
      seen.ttsBytes += audio.byteLength;
      seen.formats.add(format);
      seen.rates.add(rate);
    },
  };
  for (const [k, f] of Object.entries(on)) client.on(k, f);
  const done = once(client, 'ttsComplete');
  const wav = utteranceWav(600);
  client.sendAudio(wav.buffer.slice(wav.byteOffset, wav.byteOffset + wav.byteLength));
  await within(`${label}: ttsComplete`, 20000, done);
  for (const [k, f] of Object.entries(on)) client.off(k, f);
  checkTranscripts(seen.transcripts, label);
  check(seen.chunks.length > 0, `${label}: streamed llm chunks`);
  check(seen.llm === seen.chunks.join(''), `${label}: llm text equals the chunks: ${JSON.stringify(seen.llm)} vs ${JSON.stringify(seen.chunks)}`);
  check(seen.ttsStart === 1, `${label}: one ttsStart, got ${seen.ttsStart}`);
  check(seen.ttsBytes > 0 && seen.ttsBytes % 2 === 0, `${label}: 16-bit TTS audio, got ${seen.ttsBytes} bytes`);
  check(seen.formats.size === 1 && seen.formats.has('pcm'), `${label}: tts format pcm, got ${[...seen.formats]}`);
  check(seen.rates.size === 1 && seen.rates.has(24000), `${label}: tts sample rate 24000, got ${[...seen.rates]}`);
  return seen;
}

/** Partial transcripts (isFinal false) first, then exactly one final one, last. */
function checkTranscripts(transcripts, label) {
  const last = transcripts[transcripts.length - 1];
  check(transcripts.length >= 2 && last.isFinal === true && last.text.length > 0
    && transcripts.slice(0, -1).every((t) => t.isFinal === false),
    `${label}: partial transcripts, then one final one, got ${JSON.stringify(transcripts)}`);
}

/** One turn against a server with streaming TTS off: the whole reply in one `tts` event. */
async function wholeTtsTurn() {
  const client = newClient({ enabled: false });
  const outcome = await within('ready', 20000, readyOrFailure(client));
  check(outcome === 'ready', 'the client caught ready: ' + outcome);
  const seen = { transcripts: [], chunks: 0, ttsStart: 0, tts: [] };
  const order = [];
  client.on('transcript', (text, isFinal) => seen.transcripts.push({ text, isFinal }));
  client.on('ttsChunk', () => { seen.chunks++; });
  client.on('ttsStart', () => { seen.ttsStart++; order.push('ttsStart'); });
  client.on('tts', (audio, format) => { seen.tts.push({ audio, format }); order.push('tts'); });
  const done = once(client, 'ttsComplete');
  const wav = utteranceWav(600);
  client.sendAudio(wav.buffer.slice(wav.byteOffset, wav.byteOffset + wav.byteLength));
  await within('ttsComplete', 20000, done);
  order.push('ttsComplete');
  checkTranscripts(seen.transcripts, 'whole tts');
  check(seen.chunks === 0, `no ttsChunk with streaming TTS off, got ${seen.chunks}`);
  check(order.join(',') === 'ttsStart,tts,ttsComplete', `ttsStart, tts, ttsComplete, got ${order}`);
  const [{ audio, format }] = seen.tts;
  const head = Buffer.from(audio.slice(0, 44));
  check(format === 'wav', `tts format wav, got ${format}`);
  check(head.toString('ascii', 0, 4) === 'RIFF' && head.toString('ascii', 8, 12) === 'WAVE',
    'the tts audio is a WAV file');
  check(head.readUInt32LE(24) === 24000, `a 24 kHz WAV, got ${head.readUInt32LE(24)} Hz`);
  log(`whole tts ok: ${audio.byteLength} bytes of wav in one tts message`);
  client.close();
}

async function turnAndReconnect() {
  const client = newClient({ baseDelayMs: 100, maxDelayMs: 200, jitterFactor: 0, maxRetries: 3 });
  const errors = [];
  client.on('error', (e) => errors.push(e));
  const outcome = await within('ready', 20000, readyOrFailure(client));
  check(outcome === 'ready', 'the turn client caught ready: ' + outcome);
  const session = client.currentSessionId;
  log('session ' + session);

  const first = await fallbackTurn(client, 'turn 1');
  log(`audio turn ok: ${JSON.stringify(first.transcripts[0].text)} -> ${JSON.stringify(first.llm)}, ${first.ttsBytes} bytes of tts`);

  // The offer the client sent after ready is refused: no WebRTC on our server.
  if (!errors.some((e) => e.code === 'WEBRTC_UNAVAILABLE')) {
    await within('error WEBRTC_UNAVAILABLE', 20000, once(client, 'error', (e) => e.code === 'WEBRTC_UNAVAILABLE'));
  }
  log('offer answered with WEBRTC_UNAVAILABLE');

  // No peer ever connects: after its 30 s peer timeout the client reconnects and resumes.
  const [recovered] = await within('reconnected', 60000, once(client, 'reconnected'));
  check(recovered === true, 'the reconnect recovered the history');
  check(client.currentSessionId === session, `same session after reconnect: ${client.currentSessionId} vs ${session}`);
  log('reconnect ok: session resumed with its history');

  const second = await fallbackTurn(client, 'turn 2');
  log(`second turn ok in the resumed session: ${JSON.stringify(second.llm)}`);
  client.close();
}

async function main() {
  if (mode === 'ready') await readyOnEveryConnection(20);
  else if (mode === 'whole-tts') await wholeTtsTurn();
  else await turnAndReconnect();
  log('web client interop ok');
  process.exit(0);
}

main().catch((e) => fail((e && e.stack) || String(e)));
