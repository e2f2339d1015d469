// The static voice-agent page of examples/llmrtc/ (index.html and main.js), with main.js
// bundled by esbuild (pinned in package.json) together with the real
// `@llmrtc/llmrtc-web-client` from this directory's node_modules. Nothing is minified and
// nothing is written into the source tree unless asked.
//
// usage:
//   node llmrtc_page.mjs [--port N]   serve the page on http://127.0.0.1:N/ (default 8080; 0:
//                                      any free port), bundled in memory; prints `page <url>`
//   node llmrtc_page.mjs --out DIR     write index.html and the bundled main.js into DIR (for
//                                      any static server; examples/llmrtc/build is git-ignored)
// Open the page with `?server=ws://HOST:PORT/` to pick the llmrtc server (default
// ws://127.0.0.1:8787/). `servePage` is what tests/interop/llmrtc_browser.mjs uses.

import { createServer } from 'node:http';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
/** examples/llmrtc: the page's sources. */
export const PAGE_DIR = join(here, '..', '..', 'examples', 'llmrtc');

/** index.html and main.js (bundled, with an inline source map), as strings. */
export async function bundlePage() {
  const result = await esbuild.build({
    entryPoints: [join(PAGE_DIR, 'main.js')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2020',
    nodePaths: [join(here, 'node_modules')],
    sourcemap: 'inline',
    minify: false,
    write: false,
    logLevel: 'silent',
  });
  return {
    'index.html': readFileSync(join(PAGE_DIR, 'index.html'), 'utf8'),
    'main.js': result.outputFiles[0].text,
  };
}

/** Serves the bundled page on 127.0.0.1:`port`; resolves with `{ url, close }`. */
export async function servePage(port = 0) {
  const files = await bundlePage();
  const types = { 'index.html': 'text/html; charset=utf-8', 'main.js': 'text/javascript; charset=utf-8' };
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname.replace(/^\//, '') || 'index.html';
    if (req.method !== 'GET' || !(path in files)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    res.writeHead(200, { 'content-type': types[path], 'cache-control': 'no-store' }).end(files[path]);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

async function main(args) {
  const flag = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const out = flag('--out');
  if (out) {
    mkdirSync(out, { recursive: true });
    for (const [name, text] of Object.entries(await bundlePage())) writeFileSync(join(out, name), text);
    console.log(`page written to ${out}`);
    return;
  }
  const port = Number(flag('--port') ?? '8080');
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error('usage: node llmrtc_page.mjs [--port N] | --out DIR');
    process.exit(2);
  }
  const { url } = await servePage(port);
  console.log(`page ${url}`);
  console.log(`open ${url}?server=ws://127.0.0.1:8787/ and click Start`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main(process.argv.slice(2)).catch((e) => {
    console.error((e && e.stack) || String(e));
    process.exit(1);
  });
}
