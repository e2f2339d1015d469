// A voice-agent page on the real llmrtc web client (`@llmrtc/llmrtc-web-client`, bundled from
// npm by `tests/interop/llmrtc_page.mjs`). Start connects to the signalling URL (the `server`
// query parameter, default ws://127.0.0.1:8787/, where `llmrtc_server` listens), opens the
// WebRTC peer (data channel), shares the microphone as an audio track and plays the agent's
// speech from the server's audio track. Servers without an audio track send the speech as
// `tts-chunk`/`tts` messages instead; the page plays those with WebAudio.
//
// `?ice=URL,URL` names the ICE servers (default: the server's, else the client's own).
// The page shows the connection state, the session, what you said (partial transcripts in
// grey, then the final one), the agent's reply as it streams, and how loud the agent's speech
// is. A test harness may define `window.llmrtcReport(kind, detail)` before this script runs to
// be told each of those events; the page works the same without it.

import { LLMRTCWebClient } from '@llmrtc/llmrtc-web-client';

const DEFAULT_SERVER = 'ws://127.0.0.1:8787/';
/** Peak amplitude (of 1.0) above which the agent's speech counts as heard. */
const HEARD = 0.02;
/** How long after `ttsComplete` track audio still belongs to that reply (jitter buffer). */
const TAIL_MS = 1000;

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const serverInput = $('server');
serverInput.value = params.get('server') || DEFAULT_SERVER;
// `?ice=stun:HOST:PORT,turn:...` sets the ICE servers; without it the client takes the ones
// the server's `ready` names, else its own default (a public STUN server).
const iceServers = (params.get('ice') || '').split(',').filter(Boolean).map((urls) => ({ urls }));

/** Tells the test harness, if there is one. */
function report(kind, detail = {}) {
  if (typeof window.llmrtcReport === 'function') window.llmrtcReport(kind, detail);
}

let client = null;
let microphone = null;
let audio = null; // { ctx, analyser, timer }
let reply = null; // { started, completedAt, heard, peak, viaTrack }
let trackStream = null;
let you = null; // the <li> of what you are saying
let agent = null; // the <li> of the agent's reply

function line(cls, text) {
  const li = document.createElement('li');
  li.className = cls;
  li.textContent = text;
  $('transcript').append(li);
  return li;
}

function showError(text) {
  const li = document.createElement('li');
  li.textContent = text;
  $('errors').append(li);
}

/** The WebAudio graph: everything the agent says passes an analyser that drives the meter. */
function startAudio() {
  const ctx = new AudioContext();
  const analyser = ctx.createAnalyser();
  analyser.fftSize = 2048;
  const samples = new Float32Array(analyser.fftSize);
  const timer = setInterval(() => {
    analyser.getFloatTimeDomainData(samples);
    let peak = 0;
    for (const s of samples) peak = Math.max(peak, Math.abs(s));
    $('level').value = peak;
    if (!reply) return;
    if (reply.completedAt && performance.now() - reply.completedAt > TAIL_MS) {
      reply = null;
      $('tts').textContent = 'silent';
      return;
    }
    reply.peak = Math.max(reply.peak, peak);
    if (peak >= HEARD && !reply.heard) {
      reply.heard = true;
      report('ttsHeard', { peak, viaTrack: reply.viaTrack });
    }
  }, 20);
  return { ctx, analyser, timer };
}

/** The server's audio track: played by the <audio> element, measured by the analyser. */
function playTrack(stream) {
  trackStream = stream;
  $('speaker').srcObject = stream;
  $('speaker').play().catch((e) => showError(`cannot play the agent's audio track: ${e.message}`));
  audio.ctx.createMediaStreamSource(stream).connect(audio.analyser);
  report('ttsTrack');
}

let playhead = 0;
/** Queues decoded audio after what is already playing (speech sent as messages). */
function queue(buffer) {
  const source = audio.ctx.createBufferSource();
  source.buffer = buffer;
  source.connect(audio.analyser);
  source.connect(audio.ctx.destination);
  playhead = Math.max(playhead, audio.ctx.currentTime);
  source.start(playhead);
  playhead += buffer.duration;
}

/** A `tts-chunk` of 16-bit little-endian PCM. */
function playPcm(bytes, sampleRate) {
  const pcm = new DataView(bytes);
  const n = Math.floor(bytes.byteLength / 2);
  if (n === 0) return;
  const buffer = audio.ctx.createBuffer(1, n, sampleRate || 24000);
  const ch = buffer.getChannelData(0);
  for (let i = 0; i < n; i++) ch[i] = pcm.getInt16(i * 2, true) / 32768;
  queue(buffer);
}

function wire(c) {
  c.on('stateChange', (state) => {
    $('state').textContent = state;
    report('state', { state });
  });
  c.on('reconnected', (historyRecovered) => {
    $('session').textContent = c.currentSessionId;
    report('reconnected', { historyRecovered });
  });
  c.on('error', (e) => {
    showError(`${e.code}: ${e.message}`);
    report('error', e);
  });
  c.on('speechStart', () => {
    you = line('you partial', '…');
    report('speechStart');
  });
  c.on('speechEnd', () => report('speechEnd'));
  c.on('transcript', (text, isFinal) => {
    if (!you) you = line('you partial', '');
    you.textContent = text;
    you.classList.toggle('partial', !isFinal);
    if (isFinal) you = null;
    report('transcript', { text, isFinal });
  });
  c.on('llmChunk', (text) => {
    if (!agent) agent = line('agent', '');
    agent.textContent += text;
    report('llmChunk', { text });
  });
  c.on('llm', (text) => {
    (agent || line('agent', '')).textContent = text;
    agent = null;
    report('llm', { text });
  });
  c.on('ttsTrack', (stream) => playTrack(stream));
  c.on('ttsStart', () => {
    reply = { started: performance.now(), completedAt: 0, heard: false, peak: 0, viaTrack: !!trackStream };
    $('tts').textContent = trackStream ? 'speaking (audio track)' : 'speaking';
    report('ttsStart');
  });
  c.on('ttsChunk', (bytes, format, sampleRate) => {
    if (reply) reply.viaTrack = false;
    if (format === 'pcm') playPcm(bytes, sampleRate);
    report('ttsChunk', { bytes: bytes.byteLength, format, sampleRate });
  });
  c.on('tts', (bytes, format) => {
    if (reply) reply.viaTrack = false;
    audio.ctx.decodeAudioData(bytes.slice(0)).then(queue, (e) => showError(`cannot play ${format}: ${e.message}`));
    report('tts', { bytes: bytes.byteLength, format });
  });
  c.on('ttsComplete', () => {
    if (reply) reply.completedAt = performance.now();
    report('ttsComplete');
  });
  c.on('ttsCancelled', () => {
    reply = null;
    $('tts').textContent = 'interrupted';
    report('ttsCancelled');
  });
}

async function start(url) {
  audio = audio || startAudio();
  await audio.ctx.resume();
  client = new LLMRTCWebClient({ signallingUrl: url, iceServers });
  wire(client);
  $('start').disabled = true;
  $('stop').disabled = false;
  try {
    await client.start();
  } catch (e) {
    showError(`could not connect to ${url}: ${e.message}`);
    report('startFailed', { message: e.message });
    return;
  }
  $('session').textContent = client.currentSessionId;
  report('started', { session: client.currentSessionId });
  try {
    microphone = await navigator.mediaDevices.getUserMedia({ audio: true });
    await client.shareAudio(microphone);
    $('mic').textContent = 'on: say something';
    report('micShared');
  } catch (e) {
    showError(`microphone: ${e.message}`);
    report('micFailed', { message: e.message });
  }
}

function stop() {
  client?.close();
  client = null;
  microphone?.getTracks().forEach((t) => t.stop());
  microphone = null;
  trackStream = null;
  reply = null;
  $('mic').textContent = 'off';
  $('tts').textContent = 'silent';
  $('start').disabled = false;
  $('stop').disabled = true;
}

$('connect').addEventListener('submit', (ev) => {
  ev.preventDefault();
  start(serverInput.value);
});
$('stop').addEventListener('click', stop);
