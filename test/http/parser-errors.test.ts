import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.ts';

/**
 * Requests that Node's HTTP parser refuses before any route sees them, sent as raw bytes to a listening
 * service: each is answered with the catalogue's error body and a matching `Request-Id`, never the
 * framework's default body, and the connection is closed. Nothing behind the parser runs.
 */

let app: TestApp;
let port: number;

beforeAll(async () => {
  app = await createTestApp({ config: { WORKER_ENABLED: 'false' } });
  await app.instance.listen();
  port = (app.instance.app.server.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await app.close();
});

interface RawAnswer {
  status: number;
  headers: Map<string, string>;
  body: string;
  closed: boolean;
}

/** Sends bytes on a fresh connection and reads the answer until the service closes it (at most 5 s). */
function exchange(bytes: Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('the service kept the connection open'));
    }, 5_000);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', body = ''] = text.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers = new Map(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body, closed: true });
    });
    socket.write(bytes);
  });
}

async function depositCount(): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: string }>('SELECT count(*)::text AS count FROM deposit_orders');
  return Number(rows[0]?.count);
}

const CASES: { name: string; bytes: Buffer; status: number; code: string }[] = [
  { name: 'a request line that is not HTTP', bytes: Buffer.from('GARBAGE\r\n\r\n'), status: 400, code: 'malformed_request' },
  {
    name: 'unencoded UTF-8 in the target',
    bytes: Buffer.concat([Buffer.from('GET /v1/pay/deposits/'), Buffer.from('ฝาก', 'utf8'), Buffer.from(' HTTP/1.1\r\nHost: localhost\r\n\r\n')]),
    status: 400,
    code: 'malformed_request',
  },
  {
    name: 'both Content-Length and Transfer-Encoding',
    bytes: Buffer.from('POST /v1/pay/deposits HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n'),
    status: 400,
    code: 'malformed_request',
  },
  {
    name: 'headers larger than the limit',
    bytes: Buffer.from(`GET /v1/pay/banks HTTP/1.1\r\nHost: localhost\r\nX-Filler: ${'a'.repeat(32 * 1024)}\r\n\r\n`),
    status: 431,
    code: 'request_headers_too_large',
  },
  { name: 'a header name with a space', bytes: Buffer.from('GET /v1/pay/banks HTTP/1.1\r\nHost: localhost\r\nBad Header: x\r\n\r\n'), status: 400, code: 'malformed_request' },
];

describe('requests the HTTP parser refuses', () => {
  for (const testCase of CASES) {
    it(`${testCase.name}: ${testCase.status} ${testCase.code} in the error body, with its Request-Id, connection closed`, async () => {
      const before = await depositCount();
      const answer = await exchange(testCase.bytes);
      expect(answer.status).toBe(testCase.status);
      expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(answer.headers.get('connection')).toBe('close');
      const requestId = answer.headers.get('request-id');
      expect(requestId).toMatch(/^req_[0-9A-Z]{26}$/);
      expect(Number(answer.headers.get('content-length'))).toBe(Buffer.byteLength(answer.body));
      const body = JSON.parse(answer.body) as { error: Record<string, unknown> };
      expect(body.error).toMatchObject({ code: testCase.code, type: 'invalid_request_error', retryable: false, request_id: requestId, details: {} });
      expect(typeof body.error.message_th).toBe('string');
      // Nothing of what was sent is echoed back.
      expect(answer.body).not.toContain('ฝาก');
      expect(answer.body).not.toContain('aaaa');
      expect(await depositCount()).toBe(before);
    });
  }

  it('a well-formed request on the same server is still answered normally', async () => {
    const answer = await exchange(Buffer.from('GET /v1/webhooks/test-vectors HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'));
    expect(answer.status).toBe(200);
    expect(answer.headers.get('request-id')).toMatch(/^req_/);
  });
});
