import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * Receivers for the webhook tests: certificates from a test CA made here with openssl, and HTTPS
 * servers whose answer is scripted per request (a status, a redirect, a hang, a dropped connection,
 * or the reference receiver). Every request is recorded with its raw bytes and headers, and the
 * number of requests of one delivery in progress at once is tracked, to prove no overlap.
 */

export interface TestCertificates {
  directory: string;
  /** The test CA's certificate (PEM): what the delivery client is told to trust. */
  ca_pem: string;
  /** A certificate for localhost and 127.0.0.1 signed by the test CA. */
  leaf: { key: string; cert: string };
  /** A self-signed certificate for the same names: must be refused. */
  self_signed: { key: string; cert: string };
  remove(): void;
}

function openssl(directory: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: directory, stdio: 'pipe' });
}

/** Creates a CA, a leaf it signs and an unrelated self-signed certificate (EC P-256, two days). */
export function createTestCertificates(): TestCertificates {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'webhook-certs-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(directory, [
    'req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Webhook Test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  openssl(directory, ['req', ...ec, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost']);
  fs.writeFileSync(
    path.join(directory, 'leaf.ext'),
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n',
  );
  openssl(directory, [
    'x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '2',
    '-extfile', 'leaf.ext',
  ]);
  openssl(directory, [
    'req', '-x509', ...ec, '-keyout', 'self.key', '-out', 'self.pem', '-days', '2', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ]);
  const read = (name: string) => fs.readFileSync(path.join(directory, name), 'utf8');
  return {
    directory,
    ca_pem: read('ca.pem'),
    leaf: { key: read('leaf.key'), cert: read('leaf.pem') },
    self_signed: { key: read('self.key'), cert: read('self.pem') },
    remove: () => fs.rmSync(directory, { recursive: true, force: true }),
  };
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** Real time of arrival (performance is measured, never business time). */
  received_at_ms: number;
}

export type Behaviour =
  | { status: number; headers?: Record<string, string>; body?: string }
  | { hang: true }
  | { close: true }
  | { handle: (body: Buffer, headers: http.IncomingHttpHeaders) => Promise<{ status: number; body: unknown }> };

export interface ScriptedReceiver {
  url: string;
  requests: RecordedRequest[];
  /** Highest number of requests of one X-PG-Delivery-Id in progress at the same time. */
  max_concurrent_per_delivery: number;
  /** Replaced at will by a test; called for every request. */
  behaviour: (request: RecordedRequest) => Behaviour;
  /** Resolves when `count` requests have arrived. */
  waitFor(count: number, timeout_ms?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startScriptedReceiver(options: {
  tls: { key: string; cert: string } | null;
  behaviour: (request: RecordedRequest) => Behaviour;
  path?: string;
}): Promise<ScriptedReceiver> {
  const requests: RecordedRequest[] = [];
  const inProgress = new Map<string, number>();
  const sockets = new Set<net.Socket>();
  const waiters: { count: number; resolve: () => void }[] = [];
  const state = { max: 0 };

  const listener = (request: http.IncomingMessage, response: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const recorded: RecordedRequest = {
        method: request.method ?? '',
        path: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks),
        received_at_ms: performance.now(),
      };
      requests.push(recorded);
      const deliveryId = String(request.headers['x-pg-delivery-id'] ?? '');
      inProgress.set(deliveryId, (inProgress.get(deliveryId) ?? 0) + 1);
      state.max = Math.max(state.max, inProgress.get(deliveryId) ?? 0);
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        inProgress.set(deliveryId, (inProgress.get(deliveryId) ?? 1) - 1);
      };
      response.on('close', finish);
      for (const waiter of waiters.filter((item) => requests.length >= item.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
      const behaviour = receiver.behaviour(recorded);
      if ('hang' in behaviour) return;
      if ('close' in behaviour) {
        request.socket.destroy();
        return;
      }
      if ('handle' in behaviour) {
        behaviour.handle(recorded.body, recorded.headers).then(
          (answer) => response.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body)),
          () => response.writeHead(500).end(),
        );
        return;
      }
      response.writeHead(behaviour.status, behaviour.headers ?? {}).end(behaviour.body ?? '');
    });
  };
  const server = options.tls ? https.createServer({ key: options.tls.key, cert: options.tls.cert }, listener) : http.createServer(listener);
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('secureConnection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  // TLS handshakes that fail (a client refusing our certificate) are expected in some tests.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  const receiver: ScriptedReceiver = {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}${options.path ?? '/hooks'}`,
    requests,
    get max_concurrent_per_delivery() {
      return state.max;
    },
    behaviour: options.behaviour,
    waitFor(count, timeout_ms = 10_000) {
      if (requests.length >= count) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`only ${requests.length} of ${count} requests arrived`)), timeout_ms);
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  return receiver;
}

export const answer = (status: number, headers?: Record<string, string>): Behaviour => ({ status, ...(headers ? { headers } : {}) });
