// Packs the dashboard's static files for serving: `node pack.mjs IN OUT`.
//
// IN holds what the build made (berth.js, berth_bg.wasm from wasm-bindgen; berth.css).
// This adds ECharts and bundles the YAML editor (CodeMirror, with esbuild), then writes each
// file to OUT/pkg under a name carrying its content hash (berth.3f9c0a1b2c4d.js), with a
// gzip and a brotli copy beside it, and OUT/pkg/manifest.json mapping the plain names to the
// hashed ones (the server puts the hashed names in its pages and serves them as immutable).
// `node pack.mjs --report OUT` prints each packed file's size raw, gzip and brotli.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync, rmSync, cpSync, existsSync, statSync } from 'node:fs';
import { join, dirname, extname, basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync, brotliCompressSync, constants } from 'node:zlib';
import { buildSync } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
if (args[0] === '--report' && args[1]) report(args[1]);
else if (args.length === 2) pack(args[0], args[1]);
else {
  console.error('usage: node pack.mjs IN OUT | node pack.mjs --report OUT');
  process.exit(2);
}

function pack(input, output) {
  const pkg = join(output, 'pkg');
  rmSync(pkg, { recursive: true, force: true });
  mkdirSync(pkg, { recursive: true });
  // The files to serve: plain name → contents.
  const files = new Map([
    ['berth.js', readFileSync(join(input, 'berth.js'))],
    ['berth_bg.wasm', readFileSync(join(input, 'berth_bg.wasm'))],
    ['berth.css', readFileSync(join(input, 'berth.css'))],
    ['echarts.min.js', readFileSync(join(here, 'node_modules/echarts/dist/echarts.min.js'))],
    ['yaml-editor.js', bundle(join(here, 'js/yaml-editor.js'))],
  ]);
  // wasm-bindgen's JS snippets (if a crate has any) are imported relative to berth.js: kept as is.
  if (existsSync(join(input, 'snippets'))) cpSync(join(input, 'snippets'), join(pkg, 'snippets'), { recursive: true });
  const manifest = {};
  for (const [name, data] of files) {
    const hash = createHash('sha256').update(data).digest('hex').slice(0, 16);
    const ext = extname(name);
    const hashed = `${basename(name, ext)}.${hash}${ext}`;
    manifest[name] = hashed;
    const br = brotliCompressSync(data, {
      params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: data.length },
    });
    writeFileSync(join(pkg, hashed), data);
    writeFileSync(join(pkg, `${hashed}.gz`), gzipSync(data, { level: 9 }));
    writeFileSync(join(pkg, `${hashed}.br`), br);
  }
  writeFileSync(join(pkg, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
}

function report(output) {
  const pkg = join(output, 'pkg');
  const manifest = JSON.parse(readFileSync(join(pkg, 'manifest.json'), 'utf8'));
  const size = (f) => statSync(join(pkg, f)).size;
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`.padStart(11);
  console.log(`dashboard files in ${pkg}:`);
  console.log(`  ${'file'.padEnd(16)}${'raw'.padStart(11)}${'gzip'.padStart(11)}${'brotli'.padStart(11)}`);
  for (const [name, hashed] of Object.entries(manifest)) {
    console.log(`  ${name.padEnd(16)}${kb(size(hashed))}${kb(size(hashed + '.gz'))}${kb(size(hashed + '.br'))}`);
  }
  const wasm = manifest['berth_bg.wasm'];
  console.log(`wasm: ${size(wasm)} B raw, ${size(wasm + '.gz')} B gzip, ${size(wasm + '.br')} B brotli (target: at most 700 KB gzip)`);
}

/** `entry` and what it imports as one minified script (an IIFE: it sets a global). */
function bundle(entry) {
  const out = buildSync({ entryPoints: [entry], bundle: true, minify: true, format: 'iife', target: 'es2020', write: false, legalComments: 'none' });
  return Buffer.from(out.outputFiles[0].contents);
}
