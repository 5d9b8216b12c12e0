import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * `npm run build [-- <out-dir>]`: compiles src/ to JavaScript in dist/ (or <out-dir>) with
 * tsconfig.build.json, then copies the files beside the sources that the code reads at run time (the
 * checkout page's stylesheet, script and icon: every file of src/ that is not TypeScript). The output
 * must sit beside migrations/ and node_modules/ as src/ does: the code finds its migrations at ../migrations
 * from the build's root. The previous output is removed first, so that no file of a deleted source lingers.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const SOURCE = path.join(ROOT, 'src');
const outDirectory = path.resolve(process.argv[2] ?? path.join(ROOT, 'dist'));

fs.rmSync(outDirectory, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const compiled = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json'), '--outDir', outDirectory], { stdio: 'inherit' });
if (compiled.status !== 0) process.exit(compiled.status ?? 1);

const assets = fs.readdirSync(SOURCE, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile() && !entry.name.endsWith('.ts'));
for (const entry of assets) {
  const relative = path.relative(SOURCE, path.join(entry.parentPath ?? entry.path, entry.name));
  fs.mkdirSync(path.dirname(path.join(outDirectory, relative)), { recursive: true });
  fs.copyFileSync(path.join(SOURCE, relative), path.join(outDirectory, relative));
}
process.stdout.write(`Built ${path.relative(ROOT, outDirectory) || '.'}: ${assets.length} asset files copied beside the JavaScript.\n`);
