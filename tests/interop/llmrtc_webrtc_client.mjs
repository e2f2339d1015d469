// The real llmrtc web client (@llmrtc/llmrtc-web-client, pinned in package.json) in Node
// against an llmrtc server over WebRTC: the data channel and the audio tracks.
//
// Node has no browser globals, so this script gives the client what a browser gives it:
// `WebSocket` is the `ws` package (wrapped to see the client's own pings and the pongs, and to
// deliver messages as separate tasks, as browsers do), the
// WebRTC classes come from `@roamhq/wrtc` (the peer connection class is wrapped to see every
// message that arrives on the data channel). The microphone is wrtc's nonstandard
// `RTCAudioSource`, fed in real time with speech from `espeak-ng` (48 kHz, 10 ms frames); the
// TTS track is read with wrtc's `RTCAudioSink`. ICE servers are one loopback STUN address so
// that the client never falls back to its default public STUN server: nothing here leaves
// 127.0.0.1.
//
// Steps (each prints one line; any failure prints `FAIL: ...` and exits 1):
//  1. `start()` resolves and the client's state is `connected` (the client resolves only
//     once its data channel is open).
//  2. `shareAudio()` adds the microphone track (the client renegotiates: a second `offer`).
//  3. A spoken turn on the microphone track: `speechStart`, `speechEnd`, partial or final
//     transcripts ending in one final one, streamed `llmChunk`s adding up to `llm`,
//     `ttsStart`, `ttsComplete`; the payloads arrive on the data channel (and each reaches the
//     application once); the TTS audio plays on the server's audio track (the sink sees
//     non-silent samples between `ttsStart` and `ttsComplete`) and no `ttsChunk` comes.
//  4. The client's own heartbeat: it sends `ping` on the WebSocket (every 15 s, its fixed
//     interval) and the server's `pong` comes back.
//  5. A reconnect: the client's WebSocket is closed under it; it reconnects, resumes the
//     session (`reconnected(true)`, same session id), builds a new peer whose data channel
//     opens, re-adds the microphone track, and a second spoken turn runs as in 3.
//
// usage: node llmrtc_webrtc_client.mjs ws://127.0.0.1:PORT/ [stun:127.0.0.1:PORT]
// (the optional second argument replaces the STUN server's address, default stun:127.0.0.1:3478)
// Prints `session <id>` and ends with `webrtc web client ok`.

import WebSocket from 'ws';
import wrtc from '@roamhq/wrtc';
import { LLMRTCWebClient } from '@llmrtc/llmrtc-web-client';
import { browserGlobals, check, fail, once, spokenUtterance, within } from './llmrtc_common.mjs';

const [url, stun = 'stun:127.0.0.1:3478'] = process.argv.slice(2);
if (!url) fail('usage: node llmrtc_webrtc_client.mjs ws://127.0.0.1:PORT/ [stun:127.0.0.1:PORT]');

const RATE = 48000;
const FRAME = RATE / 100; // 10 ms
/** A TTS frame counts as sound when one of its samples is at least this loud (of 32767). */
const SOUND = 300;

// What each channel carried, in order: { via: 'ws-in'|'ws-out'|'dc-in', type }.
const traffic = [];
const trafficWaiters = [];
function record(via, raw) {
  let type = '?';
  try {
    type = JSON.parse(typeof raw === 'string' ? raw : Buffer.from(raw).toString()).type;
  } catch {
    // not JSON: kept as '?'
  }
  const entry = { via, type };
  traffic.push(entry);
  for (const w of [...trafficWaiters]) {
    if (w.match(entry)) {
      trafficWaiters.splice(trafficWaiters.indexOf(w), 1);
      w.resolve(entry);
    }
  }
}
/** The next traffic entry (after now) for which `match` holds. */
function nextTraffic(match) {
  return new Promise((resolve) => trafficWaiters.push({ match, resolve }));
}
/** The `n`th traffic entry (after now) for which `match` holds. */
async function nthTraffic(match, n) {
  let entry;
  for (let i = 0; i < n; i++) entry = await nextTraffic(match);
  return entry;
}

class ObservedWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', (ev) => record('ws-in', ev.data));
  }

  // A browser delivers `open` and each message as tasks of their own. `ws` emits `open` and
  // the frames read together with the HTTP 101 in one tick, before the client (which awaits
  // `open`) listens for `ready`, so it loses a `ready` sent at once (the real backend sends it
  // at once; README.md). Messages and `close` go out as later tasks here, in order, as in a
  // browser: this harness tests WebRTC, llmrtc_web_client.mjs tests that race.
  emit(event, ...args) {
    if (event === 'message' || event === 'close') {
      setImmediate(() => super.emit(event, ...args));
      return true;
    }
    return super.emit(event, ...args);
  }

  send(data, ...rest) {
    record('ws-out', data);
    return super.send(data, ...rest);
  }
}

// Peer connections the client builds, in order.
const peers = [];
class ObservedPeerConnection extends wrtc.RTCPeerConnection {
  constructor(config) {
    super(config);
    peers.push(this);
  }

  createDataChannel(...args) {
    const channel = super.createDataChannel(...args);
    channel.addEventListener('message', (ev) => record('dc-in', ev.data));
    return channel;
  }
}

// The client's console.error lines still reach stderr, which the test shows when it fails.
const log = browserGlobals(wrtc, ObservedWebSocket, ObservedPeerConnection);

const ICE = [{ urls: stun }];

/** The microphone: an RTCAudioSource track, fed in real time by `speak`. */
class Microphone {
  constructor() {
    this.source = new wrtc.nonstandard.RTCAudioSource();
    this.track = this.source.createTrack();
    this.stream = new wrtc.MediaStream([this.track]);
    this.silence = new Int16Array(FRAME);
    this.pending = null;
    this.started = performance.now();
    this.sent = 0;
    // A live microphone never stops: silence between utterances, paced by the clock.
    this.timer = setInterval(() => this.pump(), 5);
  }

  pump() {
    const due = Math.floor((performance.now() - this.started) / 10);
    while (this.sent < due) {
      let samples = this.silence;
      if (this.pending) {
        const { audio, at, done } = this.pending;
        samples = audio.slice(at, at + FRAME);
        if (samples.length < FRAME) {
          const padded = new Int16Array(FRAME);
          padded.set(samples);
          samples = padded;
        }
        this.pending.at += FRAME;
        if (this.pending.at >= audio.length) {
          this.pending = null;
          done();
        }
      }
      this.source.onData({ samples, sampleRate: RATE, bitsPerSample: 16, channelCount: 1, numberOfFrames: FRAME });
      this.sent++;
    }
  }

  /** Plays `audio` (Int16Array at 48 kHz) into the track; resolves when it has all been sent. */
  speak(audio) {
    return new Promise((done) => {
      this.pending = { audio, at: 0, done };
    });
  }

  stop() {
    clearInterval(this.timer);
    this.track.stop();
  }
}

/** Loudness of the server's TTS track: frames seen, and frames with sound, so far. */
class Speaker {
  constructor() {
    this.frames = 0;
    this.loud = 0;
    this.sinks = [];
  }

  listen(stream) {
    const track = stream.getAudioTracks()[0];
    check(track, 'the ttsTrack stream has an audio track');
    const sink = new wrtc.nonstandard.RTCAudioSink(track);
    sink.ondata = ({ samples }) => {
      this.frames++;
      let peak = 0;
      for (let i = 0; i < samples.length; i++) peak = Math.max(peak, Math.abs(samples[i]));
      if (peak >= SOUND) this.loud++;
    };
    this.sinks.push(sink);
  }

  stop() {
    for (const s of this.sinks) s.stop();
  }
}

/** One spoken turn on the microphone track, checked as step 3 says. */
async function spokenTurn(client, mic, speaker, utterance, label) {
  const seen = {
    events: [],
    transcripts: [],
    chunks: [],
    llm: null,
    ttsChunks: 0,
    loudBefore: 0,
    loudDuring: 0,
  };
  const on = {
    speechStart: () => seen.events.push('speechStart'),
    speechEnd: () => seen.events.push('speechEnd'),
    transcript: (text, isFinal) => seen.transcripts.push({ text, isFinal }),
    llmChunk: (c) => seen.chunks.push(c),
    llm: (t) => {
      seen.llm = t;
      seen.events.push('llm');
    },
    ttsStart: () => {
      seen.loudBefore = speaker.loud;
      seen.events.push('ttsStart');
    },
    ttsChunk: () => {
      seen.ttsChunks++;
    },
    ttsComplete: () => {
      seen.loudDuring = speaker.loud - seen.loudBefore;
      seen.events.push('ttsComplete');
    },
  };
  for (const [k, f] of Object.entries(on)) client.on(k, f);
  const dcBefore = traffic.filter((t) => t.via === 'dc-in').length;
  const done = once(client, 'ttsComplete');
  await mic.speak(utterance);
  await within(`${label}: ttsComplete`, 30000, done);
  for (const [k, f] of Object.entries(on)) client.off(k, f);

  const order = seen.events.filter((e) => e !== 'llm');
  check(order[0] === 'speechStart' && order.includes('speechEnd'),
    `${label}: speechStart, then speechEnd, got ${seen.events}`);
  const finals = seen.transcripts.filter((t) => t.isFinal);
  const last = seen.transcripts[seen.transcripts.length - 1];
  check(finals.length === 1 && last.isFinal && last.text.length > 0,
    `${label}: transcripts ending in exactly one final one (each delivered once), got ${JSON.stringify(seen.transcripts)}`);
  check(seen.chunks.length > 0, `${label}: streamed llm chunks`);
  check(seen.llm === seen.chunks.join(''),
    `${label}: llm text equals the chunks (each delivered once): ${JSON.stringify(seen.llm)} vs ${JSON.stringify(seen.chunks)}`);
  check(seen.events.filter((e) => e === 'ttsStart').length === 1, `${label}: one ttsStart, got ${seen.events}`);
  check(seen.ttsChunks === 0, `${label}: TTS on the audio track, not as ${seen.ttsChunks} tts-chunk messages`);
  check(seen.loudDuring > 0,
    `${label}: the TTS track carried sound between ttsStart and ttsComplete (${speaker.frames} frames seen, none loud)`);
  const dc = traffic.filter((t) => t.via === 'dc-in').slice(dcBefore).map((t) => t.type);
  for (const type of ['transcript', 'llm-chunk', 'llm', 'tts-start', 'tts-complete']) {
    check(dc.includes(type), `${label}: ${type} arrived on the data channel, which carried ${dc}`);
  }
  return { text: last.text, llm: seen.llm, loud: seen.loudDuring };
}

async function main() {
  const utterance = await spokenUtterance('hello there what is the weather like today', RATE);
  const client = new LLMRTCWebClient({
    signallingUrl: url,
    iceServers: ICE,
    reconnection: { baseDelayMs: 200, maxDelayMs: 1000, jitterFactor: 0, maxRetries: 5 },
  });
  const errors = [];
  client.on('error', (e) => errors.push(e));
  const speaker = new Speaker();
  client.on('ttsTrack', (stream) => speaker.listen(stream));

  // 1. start() over WebRTC.
  const t0 = performance.now();
  await within('start()', 30000, client.start());
  check(client.state === 'connected', `state connected after start(), got ${client.state}`);
  check(peers.length === 1 && peers[0].connectionState === 'connected',
    `one peer, connected: ${peers.map((p) => p.connectionState)}`);
  const session = client.currentSessionId;
  log('session ' + session);
  log(`start() resolved over WebRTC in ${Math.round(performance.now() - t0)} ms; state connected, data channel open`);

  // 2. The microphone.
  const mic = new Microphone();
  const offers = traffic.filter((t) => t.via === 'ws-out' && t.type === 'offer').length;
  await within('shareAudio()', 20000, client.shareAudio(mic.stream));
  check(traffic.filter((t) => t.via === 'ws-out' && t.type === 'offer').length === offers + 1,
    'shareAudio renegotiated with a second offer');
  log('microphone track shared (renegotiated)');

  // 3. A spoken turn on the track.
  const first = await spokenTurn(client, mic, speaker, utterance, 'turn 1');
  log(`spoken turn ok over WebRTC: ${JSON.stringify(first.text)} -> ${JSON.stringify(first.llm)}, ${first.loud} loud 10 ms frames of tts on the track`);

  // 4. The client's heartbeat (its interval is 15 s).
  const ping = await within('the client\'s ping', 25000,
    nextTraffic((t) => t.via === 'ws-out' && t.type === 'ping'));
  await within('pong', 10000, nextTraffic((t) => t.via === 'ws-in' && t.type === 'pong'));
  log(`heartbeat ok: the client sent ${ping.type} on the WebSocket and got pong`);

  // 5. Reconnect: the WebSocket drops under the client.
  const reconnected = once(client, 'reconnected');
  // Two answers: to the new peer's offer, and to the renegotiation that re-adds the microphone.
  const answered = nthTraffic((t) => t.via === 'ws-in' && t.type === 'signal', 2);
  client.ws.close();
  const [recovered] = await within('reconnected', 30000, reconnected);
  await within('state connected again', 30000,
    client.state === 'connected' ? Promise.resolve() : once(client, 'stateChange', (s) => s === 'connected'));
  check(recovered === true, 'the reconnect recovered the history');
  check(client.currentSessionId === session, `same session after reconnect: ${client.currentSessionId} vs ${session}`);
  check(peers.length === 2 && peers[1].connectionState === 'connected',
    `a new peer, connected: ${peers.map((p) => p.connectionState)}`);
  await within('the microphone re-added after the reconnect', 20000, answered);
  log('reconnect ok: session resumed with its history, a new peer connected, the microphone re-added');
  const second = await spokenTurn(client, mic, speaker, utterance, 'turn 2');
  log(`second spoken turn ok after the reconnect: ${JSON.stringify(second.llm)}`);

  const fatal = errors.filter((e) => e.code !== 'WEBRTC_ERROR');
  check(fatal.length === 0, `no errors, got ${JSON.stringify(fatal)}`);
  mic.stop();
  speaker.stop();
  client.close();
  log('webrtc web client ok');
  process.exit(0);
}

main().catch((e) => fail((e && e.stack) || String(e)));
