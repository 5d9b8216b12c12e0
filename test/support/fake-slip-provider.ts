import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local stand-in for the live slip-verification provider (the contract is at the top of
 * src/verification/http-adapter.ts): a plain HTTP server on 127.0.0.1 whose answer is scripted per
 * request by the test. Every request is recorded with its method, path, headers and body, and with
 * whether the client hung up before the answer was complete, which shows that a timed-out or
 * oversized exchange really closed its connection.
 */

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** True once the connection closed before the answer was fully written. */
  closed_early: boolean;
}

/** Answers one request; `index` counts requests from 0 since the last reset. */
export type ProviderHandler = (request: RecordedRequest, response: http.ServerResponse, index: number) => void;

export interface FakeSlipProvider {
  /** The base URL to configure the verifier with, without a trailing slash. */
  url: string;
  requests: RecordedRequest[];
  /** Replaces the handler for the requests that follow. */
  answer(handler: ProviderHandler): void;
  /** Forgets recorded requests and goes back to answering 500. */
  reset(): void;
  close(): Promise<void>;
}

/** The largest request body recorded; the verifier's requests are tiny. */
const MAX_REQUEST_BYTES = 64 * 1024;

export async function startFakeSlipProvider(): Promise<FakeSlipProvider> {
  const requests: RecordedRequest[] = [];
  const defaultHandler: ProviderHandler = (_request, response) => sendJson(response, 500, { error: 'no handler' });
  let handler = defaultHandler;
  let received_since_reset = 0;

  const server = http.createServer((incoming, response) => {
    const chunks: Buffer[] = [];
    let size = 0;
    incoming.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_REQUEST_BYTES) chunks.push(chunk);
    });
    incoming.on('end', () => {
      const recorded: RecordedRequest = {
        method: incoming.method ?? '',
        path: incoming.url ?? '',
        headers: incoming.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        closed_early: false,
      };
      response.on('close', () => {
        if (!response.writableFinished) recorded.closed_early = true;
      });
      requests.push(recorded);
      const index = received_since_reset;
      received_since_reset += 1;
      handler(recorded, response, index);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    answer(next) {
      handler = next;
    },
    reset() {
      requests.length = 0;
      received_since_reset = 0;
      handler = defaultHandler;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Writes a JSON answer, unless the client has already gone. */
export function sendJson(response: http.ServerResponse, status: number, body: unknown, content_type = 'application/json'): void {
  if (response.destroyed) return;
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  response.writeHead(status, { 'content-type': content_type, 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

export interface TransferAnswerFields {
  sending_bank_code: string;
  trans_ref: string;
  amount?: unknown;
  occurred_at?: unknown;
  sender?: Record<string, unknown>;
  receiver?: Record<string, unknown>;
}

/** A well-formed `found` answer for the given transfer; fields may be overridden to break it. */
export function foundAnswer(fields: TransferAnswerFields): Record<string, unknown> {
  return {
    status: 'found',
    transfer: {
      sending_bank_code: fields.sending_bank_code,
      trans_ref: fields.trans_ref,
      amount: fields.amount ?? '1000.00',
      occurred_at: fields.occurred_at ?? '2026-11-23T07:05:00.000Z',
      sender: fields.sender ?? { bank_code: '004', account: 'xxx-x-x1234-x', name_th: 'นาย สมชาย ใ', name_en: 'MR. SOMCHAI J' },
      receiver: fields.receiver ?? { bank_code: '014', account: 'xxx-x-x5678-x', name_th: 'บริษัท ตัวอย่าง จำกัด', name_en: null },
    },
  };
}
