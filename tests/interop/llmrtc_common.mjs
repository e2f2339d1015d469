// Helpers shared by the llmrtc interop scripts (llmrtc_web_client.mjs, llmrtc_backend.mjs,
// llmrtc_check_frames.mjs; llmrtc_client.js imports utteranceWav). The npm packages they use
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
