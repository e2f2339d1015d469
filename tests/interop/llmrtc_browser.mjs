// The real llmrtc web client in a real browser: Debian's Chromium, headless, driven by
// puppeteer-core (pinned in package.json; it downloads no browser), loading the page of
// examples/llmrtc/ (bundled and served on 127.0.0.1 by llmrtc_page.mjs) against an llmrtc
// server. The microphone is Chromium's fake capture device playing a WAV of speech from
// `espeak-ng` (it loops: a second of silence, the sentence, two seconds of silence).
// Nothing here leaves 127.0.0.1: the page gets one loopback STUN address as its ICE servers.
//
// The page is watched from two sides: it reports its own events (the client's, and
// `ttsHeard`, when its WebAudio analyser measures the agent's speech on the server's audio
// track), and a script run before the page's own wraps `WebSocket` and
// `RTCPeerConnection.prototype.createDataChannel` to see `ready`, the data channel opening
// and which messages arrive on it.
//
// Steps (each prints one line; any failure prints `FAIL: ...` and exits 1): `ready` arrives;
// the data channel opens and `start()` resolves; the microphone track is shared; a spoken
// turn gives transcripts ending in one final one, a streamed reply (`llmChunk`s adding up to
// `llm`) and TTS audio heard on the audio track between `ttsStart` and `ttsComplete` (no
// `ttsChunk`), with its payloads on the data channel; a screenshot of the page is saved.
//
// usage: node llmrtc_browser.mjs ws://127.0.0.1:PORT/ OUT_DIR
// `CHROMIUM` names the browser binary (default /usr/bin/chromium). Writes OUT_DIR/speech.wav,
// OUT_DIR/profile/ (a fresh user data dir) and OUT_DIR/llmrtc-page.png; prints
// `screenshot <path>` and ends with `browser web client ok`.

import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import puppeteer from 'puppeteer-core';
import { check, fail, spokenUtterance, wavFile, within } from './llmrtc_common.mjs';
import { servePage } from './llmrtc_page.mjs';

const [server, outArg] = process.argv.slice(2);
if (!server || !outArg) fail('usage: node llmrtc_browser.mjs ws://127.0.0.1:PORT/ OUT_DIR');
const out = resolve(outArg);
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(chromium)) fail(`no browser at ${chromium} (install Debian's chromium or set CHROMIUM)`);

const log = console.log.bind(console);

// Events from the page, in order, and waiters for the next one of a kind.
const events = [];
const waiters = [];
function onPageEvent(kind, detail) {
  const event = { kind, ...(detail || {}) };
  events.push(event);
  for (const w of [...waiters]) {
    if (w.match(event)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(event);
    }
  }
}
/** The first event (already seen or still to come) for which `match` holds. */
function seen(match) {
  const found = events.find(match);
  if (found) return Promise.resolve(found);
  return new Promise((resolve) => waiters.push({ match, resolve }));
}
const kind = (k) => (e) => e.kind === k;

// Runs in the page before its own scripts: reports what the WebSocket and the data channel carry.
function instrument() {
  const report = (kind, detail) => window.llmrtcReport(kind, detail);
  const typeOf = (data) => {
    try {
      return JSON.parse(data).type;
    } catch {
      return '?';
    }
  };
  const NativeWebSocket = window.WebSocket;
  window.WebSocket = class extends NativeWebSocket {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (ev) => report('ws-in', { type: typeOf(ev.data) }));
    }
  };
  const create = RTCPeerConnection.prototype.createDataChannel;
  RTCPeerConnection.prototype.createDataChannel = function (...args) {
    const channel = create.apply(this, args);
    channel.addEventListener('open', () => report('dc-open', { label: channel.label }));
    channel.addEventListener('message', (ev) => report('dc-in', { type: typeOf(ev.data) }));
    return channel;
  };
}

async function main() {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const wav = join(out, 'speech.wav');
  const rate = 48000;
  writeFileSync(wav, wavFile(await spokenUtterance('hello there what is the weather like today', rate, 1000, 2000), rate));

  const page = await servePage(0);
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: join(out, 'profile'),
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${wav}`,
      '--autoplay-policy=no-user-gesture-required',
    ],
  });
  try {
    const tab = await browser.newPage();
    await tab.setViewport({ width: 900, height: 700 });
    tab.on('pageerror', (e) => process.stderr.write(`page error: ${e.message}\n`));
    tab.on('console', (m) => {
      if (m.type() === 'error') process.stderr.write(`page console: ${m.text()}\n`);
    });
    await tab.exposeFunction('llmrtcReport', onPageEvent);
    await tab.evaluateOnNewDocument(instrument);
    const query = new URLSearchParams({ server, ice: 'stun:127.0.0.1:3478' });
    await tab.goto(`${page.url}?${query}`, { waitUntil: 'load' });
    log(`page loaded from ${page.url} (${await tab.evaluate(() => navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0])})`);

    await tab.click('#start');
    await within('ready', 20000, seen((e) => e.kind === 'ws-in' && e.type === 'ready'));
    log('ready');
    const started = await within('start() to resolve', 40000,
      seen((e) => e.kind === 'started' || e.kind === 'startFailed'));
    check(started.kind === 'started', `start() failed: ${started.message}`);
    check(events.some(kind('dc-open')), 'the data channel opened before start() resolved');
    log(`data channel open; start() resolved, session ${started.session}`);
    const mic = await within('the microphone', 20000, seen((e) => e.kind === 'micShared' || e.kind === 'micFailed'));
    check(mic.kind === 'micShared', `the microphone was not shared: ${mic.message}`);
    log('fake microphone shared as an audio track');

    const from = events.length;
    const complete = await within('the spoken turn (ttsComplete)', 60000, seen(kind('ttsComplete')));
    const heard = await within('the agent\'s speech on the audio track', 10000,
      seen((e) => e.kind === 'ttsHeard' && events.indexOf(e) >= from));
    const turn = events.slice(from, events.indexOf(complete) + 1);
    const transcripts = turn.filter(kind('transcript'));
    const finals = transcripts.filter((t) => t.isFinal);
    check(finals.length === 1 && transcripts[transcripts.length - 1].isFinal && finals[0].text.length > 0,
      `transcripts ending in one final one, got ${JSON.stringify(transcripts)}`);
    const chunks = turn.filter(kind('llmChunk')).map((e) => e.text);
    const llm = turn.find(kind('llm'));
    check(chunks.length > 0 && llm && llm.text === chunks.join(''),
      `a streamed reply: ${JSON.stringify(chunks)} then ${JSON.stringify(llm)}`);
    check(events.some(kind('ttsTrack')), 'the server sent an audio track');
    check(turn.filter(kind('ttsStart')).length === 1, 'one ttsStart');
    check(!turn.some(kind('ttsChunk')) && !turn.some(kind('tts')), 'TTS on the track, not in messages');
    check(heard.viaTrack, 'the speech heard came from the audio track');
    const dc = turn.filter(kind('dc-in')).map((e) => e.type);
    for (const type of ['transcript', 'llm-chunk', 'llm', 'tts-start', 'tts-complete']) {
      check(dc.includes(type), `${type} arrived on the data channel, which carried ${dc}`);
    }
    log(`spoken turn ok in Chromium: ${JSON.stringify(finals[0].text)} -> ${JSON.stringify(llm.text)}`);
    log(`tts heard on the audio track by the page's analyser (peak ${heard.peak.toFixed(3)})`);

    const shot = join(out, 'llmrtc-page.png');
    await tab.screenshot({ path: shot, fullPage: true });
    log(`screenshot ${shot}`);
  } finally {
    await browser.close();
    await page.close();
  }
  log('browser web client ok');
  process.exit(0);
}

main().catch((e) => fail((e && e.stack) || String(e)));
