// Checks server frames against the real @llmrtc/llmrtc-core (pinned in package.json), twice:
//  1. at run time: core's `parseMessage(text)` must return a message and `isServerMessage` must
//     accept it;
//  2. at compile time: every frame, verbatim, becomes `const fN: ServerMessage = <frame>;` in a
//     TypeScript file that `tsc --strict` checks against core's `protocol.d.ts` (an unknown
//     type, a wrong field type, a missing field or an extra field is an error).
//
// usage: node llmrtc_check_frames.mjs FRAMES WORKDIR
//   FRAMES: one server frame (a JSON text, as received) per line.
//   WORKDIR: an empty directory for the generated TypeScript and tsconfig.
// Prints `frames ok: N frames, types: ...`, or `FAIL: frame K (...)` and exits 1.

import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isServerMessage, parseMessage } from '@llmrtc/llmrtc-core';
import { fail } from './llmrtc_common.mjs';

const [framesFile, workdir] = process.argv.slice(2);
if (!framesFile || !workdir) fail('usage: node llmrtc_check_frames.mjs FRAMES WORKDIR');

const frames = readFileSync(framesFile, 'utf8').split('\n').filter((l) => l.length > 0);
if (frames.length === 0) fail('no frames to check');

const short = (s) => (s.length > 160 ? s.slice(0, 160) + '...' : s);

// 1. Run time.
const types = new Map();
frames.forEach((text, i) => {
  const msg = parseMessage(text);
  if (msg === null) fail(`frame ${i + 1}: parseMessage rejects it: ${short(text)}`);
  if (!isServerMessage(msg)) fail(`frame ${i + 1}: isServerMessage rejects it: ${short(text)}`);
  types.set(msg.type, (types.get(msg.type) ?? 0) + 1);
});

// 2. Compile time.
const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const coreDir = path.dirname(require.resolve('@llmrtc/llmrtc-core/package.json'));
const protocol = path.join(coreDir, 'dist', 'protocol.js');
const tscBin = path.join(path.dirname(require.resolve('typescript/package.json')), 'bin', 'tsc');

const FIRST_FRAME_LINE = 3;
const ts = [
  `import type { ServerMessage } from ${JSON.stringify(protocol)};`,
  '// One server frame per line, verbatim.',
  ...frames.map((text, i) => `export const f${i + 1}: ServerMessage = ${text};`),
  '',
].join('\n');
writeFileSync(path.join(workdir, 'frames.ts'), ts);
writeFileSync(
  path.join(workdir, 'tsconfig.json'),
  JSON.stringify(
    {
      compilerOptions: {
        strict: true,
        exactOptionalPropertyTypes: true,
        noEmit: true,
        target: 'es2022',
        module: 'esnext',
        moduleResolution: 'bundler',
        lib: ['es2022', 'dom'],
        types: [],
        skipLibCheck: true,
      },
      files: ['frames.ts'],
    },
    null,
    2,
  ),
);
try {
  execFileSync(process.execPath, [tscBin, '-p', path.join(workdir, 'tsconfig.json'), '--pretty', 'false'], {
    cwd: here,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    maxBuffer: 64 << 20,
  });
} catch (e) {
  const report = String(e.stdout ?? '') + String(e.stderr ?? '');
  const lines = report.split('\n').filter((l) => l.trim().length > 0);
  const explained = lines.slice(0, 20).map((l) => {
    const m = /frames\.ts\((\d+),\d+\)/.exec(l);
    if (!m) return short(l);
    const k = Number(m[1]) - FIRST_FRAME_LINE + 1;
    return `frame ${k} (${short(frames[k - 1] ?? '?')}): ${short(l.replace(/^.*?error /, 'error '))}`;
  });
  fail(`tsc rejects ${lines.length} line(s) against protocol.d.ts:\n` + explained.join('\n'));
}

const summary = [...types.entries()].map(([t, n]) => `${t} x${n}`).join(', ');
console.log(`frames ok: ${frames.length} frames, types: ${summary}`);
