import http from 'node:http';
import type net from 'node:net';
import { createTestApp, type TestApp, type TestAppOptions } from '../../../../test/support/app.ts';
import { PaymentClient, type ClientOptions } from '../../src/index.ts';

/**
 * The real service, started in-process on this test file's own database (PGlite by default, PostgreSQL
 * with DATABASE_URL) and listening on a free loopback port, so that the SDK talks to it over HTTP
 * exactly as a merchant's server would.
 */
export interface ListeningService {
  app: TestApp;
  base_url: string;
  /** An SDK client with the sandbox merchant's key. */
  client(options?: Partial<ClientOptions>): PaymentClient;
  close(): Promise<void>;
}

export async function startService(options: TestAppOptions = {}): Promise<ListeningService> {
  const app = await createTestApp(options);
  await app.instance.app.listen({ port: 0, host: '127.0.0.1' });
  const base_url = `http://127.0.0.1:${(app.instance.app.server.address() as net.AddressInfo).port}`;
  // The SDK signs with the real time by default: the service's clock must agree with it.
  app.clock.set(new Date());
  return {
    app,
    base_url,
    client: (overrides = {}) =>
      new PaymentClient({ base_url, api_key: app.sandbox.api_key, signing_secret: app.sandbox.signing_secret, ...overrides }),
    close: () => app.close(),
  };
}

export interface ProxiedRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** What the proxy does with one request: pass it to the service, drop the connection, or answer itself. */
export type ProxyAction = 'forward' | 'drop' | { status: number; headers?: Record<string, string>; body: string };

/**
 * A loopback HTTP proxy in front of the service that records every request and can fail chosen ones, so
 * that the SDK's retries meet a lost connection or a load-shedding answer, and its later attempts
 * still reach the real service (which checks their signatures, nonces and idempotency keys).
 */
export interface Proxy {
  url: string;
  requests: ProxiedRequest[];
  action: (request: ProxiedRequest, index: number) => ProxyAction;
  close(): Promise<void>;
}

export async function startProxy(target: string): Promise<Proxy> {
  const sockets = new Set<net.Socket>();
  const proxy: Proxy = {
    url: '',
    requests: [],
    action: () => 'forward',
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const recorded: ProxiedRequest = { method: request.method ?? 'GET', url: request.url ?? '/', headers: request.headers, body: Buffer.concat(chunks) };
      const index = proxy.requests.push(recorded) - 1;
      const action = proxy.action(recorded, index);
      if (action === 'drop') {
        request.socket.destroy();
        return;
      }
      if (action !== 'forward') {
        response.writeHead(action.status, { 'content-type': 'application/json', ...action.headers }).end(action.body);
        return;
      }
      const headers = { ...request.headers };
      delete headers.host;
      delete headers.connection;
      fetch(`${target}${recorded.url}`, {
        method: recorded.method,
        headers: headers as Record<string, string>,
        ...(recorded.body.length > 0 ? { body: recorded.body } : {}),
        redirect: 'manual',
      }).then(
        async (answer) => {
          const text = Buffer.from(await answer.arrayBuffer());
          const out: Record<string, string> = {};
          answer.headers.forEach((value, name) => {
            if (!['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'content-encoding'].includes(name)) out[name] = value;
          });
          response.writeHead(answer.status, out).end(text);
        },
        () => response.writeHead(502).end(),
      );
    });
  });
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return proxy;
}
