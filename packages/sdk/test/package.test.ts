import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The package as a merchant gets it: compiled by tsc with declarations, free of runtime dependencies
 * (Node's own crypto and fetch only), and usable after a plain `npm install ./packages/sdk` in another
 * project, from JavaScript and from type-checked TypeScript.
 */

const run = promisify(execFile);
const packageDirectory = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repository = path.resolve(packageDirectory, '../..');
const tsc = path.join(repository, 'node_modules', '.bin', 'tsc');
let scratch: string;

beforeAll(() => {
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-package-'));
});
afterAll(() => {
  fs.rmSync(scratch, { recursive: true, force: true });
});

function emittedFiles(directory: string): string[] {
  return fs.readdirSync(directory, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.js'));
}

describe('@payment-transfer/sdk as a package', () => {
  it('compiles with tsc to JavaScript and declarations that import nothing but node: modules and each other', async () => {
    const out = path.join(scratch, 'build');
    await run(tsc, ['-p', path.join(packageDirectory, 'tsconfig.json'), '--outDir', out]);
    expect(fs.existsSync(path.join(out, 'index.js'))).toBe(true);
    expect(fs.readFileSync(path.join(out, 'index.d.ts'), 'utf8')).toContain('PaymentClient');
    for (const file of emittedFiles(out)) {
      const text = fs.readFileSync(path.join(out, file), 'utf8');
      for (const match of text.matchAll(/\bfrom\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/g)) {
        const specifier = match[1] ?? match[2] ?? '';
        expect(specifier.startsWith('node:') || specifier.startsWith('./'), `${file} imports ${specifier}`).toBe(true);
      }
    }
    const manifest = JSON.parse(fs.readFileSync(path.join(packageDirectory, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    expect(manifest.dependencies ?? {}).toEqual({});
    const module = (await import(pathToFileURL(path.join(out, 'index.js')).href)) as Record<string, unknown>;
    expect(typeof module.PaymentClient).toBe('function');
    expect(typeof module.WebhookVerifier).toBe('function');
    expect(typeof module.reconcile).toBe('function');
  }, 120_000);

  it('works after a plain `npm install ./packages/sdk` in another project, typed', async () => {
    if (!fs.existsSync(path.join(packageDirectory, 'dist', 'index.js'))) {
      // `npm install` (prepare) and `npm test` (pretest) build it; a lone run of this file builds it here.
      await run(tsc, ['-p', path.join(packageDirectory, 'tsconfig.json')]);
    }
    const project = path.join(scratch, 'merchant');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'merchant-project', private: true, type: 'module' }));
    await run('npm', ['install', packageDirectory, '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock'], { cwd: project });
    const script = [
      "import { PaymentClient, signRequest, API_VERSION } from '@payment-transfer/sdk';",
      "const client = new PaymentClient({ base_url: 'https://pay.example', api_key: 'sk_test_x', signing_secret: 's' });",
      "const headers = signRequest({ api_key: 'sk_test_x', signing_secret: 's', method: 'GET', path: '/v1/pay/banks', timestamp_seconds: 1, nonce: 'n' });",
      'console.log(JSON.stringify({ base_url: client.base_url, version: API_VERSION, signature: headers["pg-signature"] }));',
    ].join('\n');
    fs.writeFileSync(path.join(project, 'main.mjs'), script);
    const { stdout } = await run(process.execPath, ['main.mjs'], { cwd: project });
    expect(JSON.parse(stdout)).toEqual({ base_url: 'https://pay.example', version: '2026-08-01', signature: expect.stringMatching(/^v1=[0-9a-f]{64}$/) });

    // The declarations type-check a merchant's code, and catch a wrong field.
    fs.writeFileSync(
      path.join(project, 'typed.ts'),
      [
        "import { PaymentClient, isKnownEvent, type PaymentEvent } from '@payment-transfer/sdk';",
        "const client = new PaymentClient({ base_url: 'https://pay.example', api_key: 'k', signing_secret: 's' });",
        "export async function settled(event: PaymentEvent): Promise<number> {",
        "  if (!isKnownEvent(event)) return 0;",
        "  if (event.type === 'deposit.settled') return event.data.object.credited_amount_minor ?? 0;",
        '  return (await client.balance.retrieve()).available_minor;',
        '}',
      ].join('\n'),
    );
    const check = ['--noEmit', '--strict', '--skipLibCheck', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--types', 'node', '--typeRoots', path.join(repository, 'node_modules', '@types')];
    await run(tsc, [...check, 'typed.ts'], { cwd: project });
    fs.writeFileSync(path.join(project, 'wrong.ts'), "import { PaymentClient } from '@payment-transfer/sdk';\nexport const x: string = (await new PaymentClient({ base_url: 'https://p', api_key: 'k', signing_secret: 's' }).balance.retrieve()).available_minor;\n");
    const wrong = await run(tsc, [...check, 'wrong.ts'], { cwd: project }).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? '',
    );
    expect(wrong).toContain("Type 'number' is not assignable to type 'string'");
  }, 120_000);
});
