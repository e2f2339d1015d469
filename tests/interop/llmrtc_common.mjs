// Helpers shared by the llmrtc interop scripts (llmrtc_web_client.mjs, llmrtc_webrtc_client.mjs,
// llmrtc_browser.mjs, llmrtc_backend.mjs, llmrtc_check_frames.mjs; llmrtc_client.js imports
// utteranceWav). The npm packages they use
// are pinned in package.json beside this file and installed with `npm ci --ignore-scripts`
// (see tests/interop/README.md).

/** Prints `FAIL: msg` and exits 1 (straight to stderr: scripts may silence the console). */
export function fail(msg) {
  process.stderr.write('FAIL: ' + msg + '\n');
  process.exit(1);
}

/** Fails unless `cond`. */
export function check(cond, msg) {
  if (!cond) fail(msg);
}

/** Resolves with `promise`'s value, or fails naming `what` after `ms` (a bound, not a wait). */
export function within(what, ms, promise) {
  let timer;
  const bound = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out waiting for ' + what)), ms);
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

/** The next `event` emitted by `emitter` (EventEmitter or eventemitter3), as an array of its arguments. */
export function once(emitter, event, filter = () => true) {
  return new Promise((resolve) => {
    const handler = (...args) => {
      if (!filter(...args)) return;
      emitter.off(event, handler);
      resolve(args);
    };
    emitter.on(event, handler);
  });
}

/**
 * A 16 kHz mono 16-bit PCM WAV: 300 ms of silence, `toneMs` of a 180 Hz tone, 600 ms of
 * silence (what our server's VAD and the stand-in STT take as one utterance).
 */
export function utteranceWav(toneMs = 600) {
  const rate = 16000;
  const samples = [];
  for (let i = 0; i < rate * 0.3; i++) samples.push(0);
  for (let i = 0; i < (rate * toneMs) / 1000; i++) {
    samples.push(Math.round(6000 * Math.sin((2 * Math.PI * 180 * i) / rate)));
  }
  for (let i = 0; i < rate * 0.6; i++) samples.push(0);
  return wavFile(samples, rate);
}

/**
 * Gives a script in Node the browser globals the web client uses: `WebSocket` (the `ws`
 * class given, or a subclass of it) and the WebRTC classes of `wrtc` (`RTCPeerConnection`
 * replaced by `PeerConnection` when given). Silences console.log and console.warn (the
 * client logs every step; console.error still reaches stderr) and returns the original
 * console.log for the script's own lines.
 */
export function browserGlobals(wrtc, WebSocket, PeerConnection = wrtc.RTCPeerConnection) {
  globalThis.WebSocket = WebSocket;
  for (const name of Object.keys(wrtc)) {
    if (name.startsWith('RTC') || name.startsWith('Media')) globalThis[name] = wrtc[name];
  }
  globalThis.RTCPeerConnection = PeerConnection;
  const log = console.log.bind(console);
  console.log = () => {};
  console.warn = () => {};
  return log;
}

/**
 * Reads a mono 16-bit PCM WAV (any sample rate): `{ rate, samples }` with `samples` an
 * Int16Array. Fails on anything else (other encodings, stereo, no `data` chunk).
 */
export function readWav(buf) {
  check(buf.length >= 12 && buf.toString('ascii', 0, 4) === 'RIFF' && buf.toString('ascii', 8, 12) === 'WAVE',
    'not a WAV file');
  let rate = 0;
  let off = 12;
  while (off + 8 <= buf.length) {
    const id = buf.toString('ascii', off, off + 4);
    // espeak-ng writes 0xffffffff as the data size when it writes to a pipe.
    const size = Math.min(buf.readUInt32LE(off + 4), buf.length - off - 8);
    if (id === 'fmt ') {
      check(buf.readUInt16LE(off + 8) === 1 && buf.readUInt16LE(off + 10) === 1 && buf.readUInt16LE(off + 22) === 16,
        'the WAV is not mono 16-bit PCM');
      rate = buf.readUInt32LE(off + 12);
    } else if (id === 'data') {
      check(rate > 0, 'the WAV has data before fmt');
      const samples = new Int16Array(size >> 1);
      for (let i = 0; i < samples.length; i++) samples[i] = buf.readInt16LE(off + 8 + i * 2);
      return { rate, samples };
    }
    off += 8 + size + (size & 1);
  }
  return fail('the WAV has no data chunk');
}

/** A mono 16-bit PCM WAV file of `samples` (Int16Array) at `rate`. */
export function wavFile(samples, rate) {
  const data = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => data.writeInt16LE(s, i * 2));
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVE', 8);
  h.write('fmt ', 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

/** `samples` (Int16Array at `from` Hz) at `to` Hz, by linear interpolation. */
export function resample(samples, from, to) {
  if (from === to) return samples;
  const n = Math.floor((samples.length * to) / from);
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const x = (i * from) / to;
    const j = Math.floor(x);
    const a = samples[j];
    const b = samples[Math.min(j + 1, samples.length - 1)];
    out[i] = Math.round(a + (b - a) * (x - j));
  }
  return out;
}

/**
 * `text` spoken by `espeak-ng` (the `ESPEAK_NG` binary, else `espeak-ng` on PATH), at `rate`
 * Hz, between `leadMs` and `tailMs` of silence: real speech, which voice activity detectors
 * built for speech (the real backend's Silero VAD) take as an utterance where a tone is not.
 */
export async function spokenUtterance(text, rate, leadMs = 500, tailMs = 1500) {
  const { execFileSync } = await import('node:child_process');
  let wav;
  try {
    wav = execFileSync(process.env.ESPEAK_NG || 'espeak-ng', ['--stdout', '-s', '150', text], {
      maxBuffer: 64 << 20,
    });
  } catch (e) {
    return fail(`espeak-ng does not run: ${e.message}`);
  }
  const spoken = readWav(wav);
  const speech = resample(spoken.samples, spoken.rate, rate);
  const lead = Math.round((rate * leadMs) / 1000);
  const tail = Math.round((rate * tailMs) / 1000);
  const out = new Int16Array(lead + speech.length + tail);
  out.set(speech, lead);
  return out;
}
