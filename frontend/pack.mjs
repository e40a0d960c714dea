// Packs the dashboard's static files for serving: `node pack.mjs IN OUT`.
//
// IN holds what the build made (berth.js, berth_bg.wasm from wasm-bindgen; wasm-split's
// __wasm_split.js and chunks; berth.css). This adds ECharts and bundles the YAML editor
// (CodeMirror, with esbuild), then writes each file to OUT/pkg under a name carrying its
// content hash (berth.3f9c0a1b2c4d.js; the app's files in one hashed directory), with a gzip
// and a brotli copy beside it, OUT/pkg/manifest.json mapping the plain names to the hashed
// ones (the server puts the hashed names in its pages and serves them as immutable) and
// OUT/pkg/split.json, what each page group's code needs.
// `node pack.mjs --report OUT` prints each packed file's size raw, gzip and brotli.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync, rmSync, cpSync, existsSync, statSync, readdirSync } from 'node:fs';
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
  const manifest = {};

  // The app: wasm-bindgen's glue, the shell wasm, wasm-split's loader, the page groups' chunks
  // and any JS snippets. They import one another by relative names (the loader and the glue
  // import each other), so they keep their names and share one directory named by the hash
  // of them all: app.<hash>/berth.js. A change to any of them gives every one a new URL.
  const app = readdirSync(input)
    .filter((f) => f !== 'berth.css' && !f.endsWith('.d.ts'))
    .sort();
  const hash = createHash('sha256');
  for (const f of app) hashInto(hash, join(input, f), f);
  const dir = `app.${hash.digest('hex').slice(0, 16)}`;
  for (const f of app) {
    if (statSync(join(input, f)).isDirectory()) cpSync(join(input, f), join(pkg, dir, f), { recursive: true });
    else write(join(pkg, dir, f), readFileSync(join(input, f)));
  }
  manifest['app/'] = `${dir}/`;
  manifest['berth.js'] = `${dir}/berth.js`;
  manifest['berth_bg.wasm'] = `${dir}/berth_bg.wasm`;

  // The other files, each under a name carrying its own content hash.
  const files = new Map([
    ['berth.css', readFileSync(join(input, 'berth.css'))],
    ['echarts.min.js', readFileSync(join(here, 'node_modules/echarts/dist/echarts.min.js'))],
    ['yaml-editor.js', bundle(join(here, 'js/yaml-editor.js'))],
  ]);
  for (const [name, data] of files) {
    const ext = extname(name);
    const hashed = `${basename(name, ext)}.${createHash('sha256').update(data).digest('hex').slice(0, 16)}${ext}`;
    manifest[name] = hashed;
    write(join(pkg, hashed), data);
  }
  writeFileSync(join(pkg, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  // What each page group loads (its chunk and the shared chunks it needs), for the server to
  // preload with the page that shows the group, in the form Leptos reads.
  const loads = existsSync(join(input, '__wasm_split.js')) ? splitLoads(readFileSync(join(input, '__wasm_split.js'), 'utf8')) : {};
  writeFileSync(join(pkg, 'split.json'), JSON.stringify({ dir, loader: '__wasm_split.js', loads }, null, 2) + '\n');
}

/** `data` at `path`, with a gzip and a brotli copy beside it. */
function write(path, data) {
  mkdirSync(dirname(path), { recursive: true });
  const br = brotliCompressSync(data, {
    params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: data.length },
  });
  writeFileSync(path, data);
  writeFileSync(`${path}.gz`, gzipSync(data, { level: 9 }));
  writeFileSync(`${path}.br`, br);
}

/** Adds the file or directory at `path` (named `name`) to `hash`. */
function hashInto(hash, path, name) {
  if (statSync(path).isDirectory()) {
    for (const f of readdirSync(path).sort()) hashInto(hash, join(path, f), `${name}/${f}`);
  } else {
    hash.update(name + '\0').update(readFileSync(path)).update('\0');
  }
}

/**
 * From wasm-split's loader: for each split function (`config_pages_<n>`), the modules it
 * loads (its own `split_…` and the shared `chunk_…`s, without `.wasm`).
 */
export function splitLoads(js) {
  const chunks = {};
  for (const m of js.matchAll(/const (__chunk_\d+) = makeLoad\(\(\) => \{\s*const src = fetch\(new URL\("\.\/([\w.]+)\.wasm"/g)) chunks[m[1]] = m[2];
  const loads = {};
  const split = /export const __wasm_split_load_\w+ = wrapAsyncCb\(makeLoad\(\(\) => \{\s*const src = fetch\(new URL\("\.\/split_(\w+)\.wasm"[\s\S]*?\n, \[([^\]]*)\]\)\)/g;
  for (const m of js.matchAll(split)) {
    const deps = m[2].split(',').map((v) => v.trim()).filter(Boolean);
    for (const v of deps) if (!chunks[v]) throw new Error(`__wasm_split.js: ${v} is not a chunk this script can read`);
    loads[m[1]] = [`split_${m[1]}`, ...deps.map((v) => chunks[v])];
  }
  const exported = (js.match(/export const __wasm_split_load_/g) || []).length;
  if (Object.keys(loads).length !== exported) throw new Error(`__wasm_split.js: read ${Object.keys(loads).length} of ${exported} split functions`);
  return loads;
}

function report(output) {
  const pkg = join(output, 'pkg');
  const manifest = JSON.parse(readFileSync(join(pkg, 'manifest.json'), 'utf8'));
  const size = (f) => statSync(join(pkg, f)).size;
  const sizes = (f) => [size(f), size(f + '.gz'), size(f + '.br')];
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`.padStart(11);
  const row = (name, [raw, gz, br]) => console.log(`  ${name.padEnd(24)}${kb(raw)}${kb(gz)}${kb(br)}`);
  const sum = (files) => files.map(sizes).reduce((a, b) => a.map((x, i) => x + b[i]), [0, 0, 0]);
  console.log(`dashboard files in ${pkg}:`);
  console.log(`  ${'file'.padEnd(24)}${'raw'.padStart(11)}${'gzip'.padStart(11)}${'brotli'.padStart(11)}`);
  for (const [name, hashed] of Object.entries(manifest)) if (!name.endsWith('/')) row(name, sizes(hashed));
  const split = JSON.parse(readFileSync(join(pkg, 'split.json'), 'utf8'));
  const adds = Object.entries(split.loads).map(([fn, modules]) => ({ fn, added: sum(modules.map((m) => `${split.dir}/${m}.wasm`)) }));
  for (const { fn, added } of adds) row(`+ ${fn.replace(/_\d+$/, '')}`, added);
  const wasm = sizes(manifest['berth_bg.wasm']);
  console.log(`wasm shell: ${wasm[0]} B raw, ${wasm[1]} B gzip, ${wasm[2]} B brotli; a page's first visit adds its group (+ rows)`);
  // A first visit loads the shell and the page's group (`*_pages`); other lazy code comes
  // later, when used.
  const visits = adds.filter(({ fn }) => /_pages_\d+$/.test(fn)).map(({ fn, added: [, gz, br] }) => (
    { group: fn.replace(/_\d+$/, ''), gz: wasm[1] + gz, br: wasm[2] + br }
  ));
  const largest = visits.reduce((a, b) => (b.gz > a.gz ? b : a));
  const list = visits.map((v) => `${v.group} ${(v.gz / 1024).toFixed(0)} KB`).join(', ');
  console.log(`wasm of a first visit, gzip: ${list}; largest ${(largest.gz / 1024).toFixed(0)} KB (${(largest.br / 1024).toFixed(0)} KB brotli), target: at most 700 KB gzip`);
}

/** `entry` and what it imports as one minified script (an IIFE: it sets a global). */
function bundle(entry) {
  const out = buildSync({ entryPoints: [entry], bundle: true, minify: true, format: 'iife', target: 'es2020', write: false, legalComments: 'none' });
  return Buffer.from(out.outputFiles[0].contents);
}
