import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The webhook receiver of bench/growth.ts, in a child process of its own so that its CPU is not counted
 * as the service's: an HTTPS server (a certificate of the run's test CA) that answers 200 at once.
 */

async function serve(): Promise<void> {
  const directory = process.env.BENCH_TLS_DIRECTORY ?? '';
  const tls = { key: fs.readFileSync(path.join(directory, 'leaf.key'), 'utf8'), cert: fs.readFileSync(path.join(directory, 'leaf.pem'), 'utf8') };
  const server = https.createServer(tls, (request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-length': '0' }).end());
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.send?.({ port: (server.address() as { port: number }).port });
  process.on('disconnect', () => process.exit(0));
}

export async function startReceiver(certificate_directory: string): Promise<{ child: ChildProcess; url: string }> {
  const child = fork(fileURLToPath(import.meta.url), ['--serve'], { execArgv: process.execArgv, stdio: 'inherit', env: { ...process.env, BENCH_TLS_DIRECTORY: certificate_directory } });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`the receiver process exited (${code})`)));
  });
  return { child, url: `https://127.0.0.1:${port}/hooks` };
}

if (process.argv.includes('--serve')) void serve();
