import type http from 'node:http';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { TransferQuery } from '../../src/verification/bank-port.ts';
import { HttpBankVerifier, createBankVerifierFromConfig, type HttpBankVerifierOptions } from '../../src/verification/http-adapter.ts';
import { foundAnswer, sendJson, startFakeSlipProvider, type FakeSlipProvider } from '../support/fake-slip-provider.ts';

/**
 * Contract tests of the live slip-verification adapter against a local fake provider. Timeouts and
 * backoffs are small (150 ms per attempt, 10 ms backoff scale) so that the file runs in a few seconds.
 */

const KEY = 'sk_live_provider_key_0123456789';
const TIMEOUT_MS = 150;
const QUERY: TransferQuery = { white_label_id: 'wl_01', livemode: true, sending_bank_code: '004', trans_ref: '016327070500AQR04523' };

let provider: FakeSlipProvider;

beforeAll(async () => {
  provider = await startFakeSlipProvider();
});

afterAll(async () => {
  await provider.close();
});

beforeEach(() => {
  provider.reset();
});

function verifier(options: Partial<HttpBankVerifierOptions> = {}): HttpBankVerifier {
  return new HttpBankVerifier({ url: provider.url, key: KEY, timeout_ms: TIMEOUT_MS, retry_base_ms: 10, ...options });
}

function answerFound(fields: Partial<Parameters<typeof foundAnswer>[0]> = {}): void {
  provider.answer((_request, response) => sendJson(response, 200, foundAnswer({ sending_bank_code: QUERY.sending_bank_code, trans_ref: QUERY.trans_ref, ...fields })));
}

function answerStatus(status: number): void {
  provider.answer((_request, response) => sendJson(response, status, { error: 'scripted' }));
}

describe('found', () => {
  it('returns the transfer with satang, the time as a Date and normalised accounts', async () => {
    answerFound({ amount: '1000.00', occurred_at: '2026-11-23T14:05:00+07:00' });
    const lookup = await verifier().verifyTransfer(QUERY);
    expect(lookup).toEqual({
      outcome: 'found',
      transfer: {
        sending_bank_code: '004',
        trans_ref: QUERY.trans_ref,
        amount_minor: 100_000,
        occurred_at: new Date('2026-11-23T07:05:00.000Z'),
        sender: { bank_code: '004', account_number: 'xxxxx1234x', name_th: 'นาย สมชาย ใ', name_en: 'MR. SOMCHAI J' },
        receiver: { bank_code: '014', account_number: 'xxxxx5678x', name_th: 'บริษัท ตัวอย่าง จำกัด', name_en: null },
      },
    });
  });

  it.each([
    ['1000', 100_000],
    ['1000.5', 100_050],
    ['1000.50', 100_050],
    ['0.01', 1],
    ['0.1', 10],
    ['123456.78', 12_345_678],
    ['90071992547409.91', Number.MAX_SAFE_INTEGER],
  ])('converts the amount %s to %d satang exactly', async (amount, satang) => {
    answerFound({ amount });
    const lookup = await verifier().verifyTransfer(QUERY);
    expect(lookup.outcome).toBe('found');
    if (lookup.outcome === 'found') expect(lookup.transfer.amount_minor).toBe(satang);
  });

  it.each([
    ['xxx-x-x1234-x', 'xxxxx1234x'],
    ['XXX-X-X1234-X', 'XXXXX1234X'],
    ['***-*-*1234-*', '*****1234*'],
    ['•••-•-•1234-•', '•••••1234•'],
    ['123 4 56789 0', '1234567890'],
    ['1234', '1234'],
  ])('normalises the account %s to %s', async (account, normalised) => {
    answerFound({ sender: { bank_code: '004', account, name_th: null } });
    const lookup = await verifier().verifyTransfer(QUERY);
    expect(lookup.outcome).toBe('found');
    if (lookup.outcome === 'found') expect(lookup.transfer.sender).toEqual({ bank_code: '004', account_number: normalised, name_th: null, name_en: null });
  });

  it('treats absent, null and empty names as null', async () => {
    answerFound({ sender: { bank_code: '004', account: '1234567890', name_th: '', name_en: null }, receiver: { bank_code: '014', account: '0987654321' } });
    const lookup = await verifier().verifyTransfer(QUERY);
    expect(lookup.outcome).toBe('found');
    if (lookup.outcome === 'found') {
      expect(lookup.transfer.sender).toMatchObject({ name_th: null, name_en: null });
      expect(lookup.transfer.receiver).toMatchObject({ name_th: null, name_en: null });
    }
  });

  it('accepts RFC 3339 offsets, lower-case separators and long fractions', async () => {
    answerFound({ occurred_at: '2026-11-23t02:05:00.123456789-05:00' });
    const lookup = await verifier().verifyTransfer(QUERY);
    expect(lookup.outcome).toBe('found');
    if (lookup.outcome === 'found') expect(lookup.transfer.occurred_at.toISOString()).toBe('2026-11-23T07:05:00.123Z');
  });
});

describe('the request', () => {
  it('is a POST of the query as JSON with the bearer key', async () => {
    answerFound();
    await verifier().verifyTransfer(QUERY);
    expect(provider.requests).toHaveLength(1);
    const request = provider.requests[0]!;
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/v1/transfers/verify');
    expect(request.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers.accept).toBe('application/json');
    expect(JSON.parse(request.body)).toEqual({ sending_bank_code: '004', trans_ref: QUERY.trans_ref });
  });

  it('keeps a base path and ignores a trailing slash', async () => {
    answerFound();
    await verifier({ url: `${provider.url}/provider/` }).verifyTransfer(QUERY);
    expect(provider.requests[0]?.path).toBe('/provider/v1/transfers/verify');
  });
});

describe('not_found', () => {
  it('comes from a not_found body', async () => {
    provider.answer((_request, response) => sendJson(response, 200, { status: 'not_found' }));
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'not_found' });
    expect(provider.requests).toHaveLength(1);
  });

  it('comes from HTTP 404 with the not_found answer', async () => {
    provider.answer((_request, response) => sendJson(response, 404, { status: 'not_found' }));
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'not_found' });
    expect(provider.requests).toHaveLength(1);
  });

  it('is not what a bare 404 means (a wrong base path or a proxy): http_error, not retried', async () => {
    answerStatus(404);
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    provider.answer((_request, response) => {
      response.writeHead(404, { 'content-type': 'text/html' });
      response.end('<h1>Not Found</h1>');
    });
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(provider.requests).toHaveLength(2);
  });
});

describe('malformed answers are unavailable and not retried', () => {
  const malformed = { outcome: 'unavailable', reason: 'malformed_response' };

  async function expectMalformed(): Promise<void> {
    expect(await verifier().verifyTransfer(QUERY)).toEqual(malformed);
    expect(provider.requests).toHaveLength(1);
  }

  it('invalid JSON', async () => {
    provider.answer((_request, response) => sendJson(response, 200, '{"status":"found",'));
    await expectMalformed();
  });

  it('a content type other than JSON', async () => {
    provider.answer((_request, response) => sendJson(response, 200, { status: 'not_found' }, 'text/html'));
    await expectMalformed();
  });

  it('an unknown status', async () => {
    provider.answer((_request, response) => sendJson(response, 200, { status: 'verified' }));
    await expectMalformed();
  });

  it('found without a transfer', async () => {
    provider.answer((_request, response) => sendJson(response, 200, { status: 'found' }));
    await expectMalformed();
  });

  it.each([['0'], ['0.00'], ['-1.00'], ['1.234'], ['1e3'], ['1,000.00'], ['01000'], ['.5'], ['1.'], [''], [1000], ['90071992547409.92']])(
    'the amount %j',
    async (amount) => {
      answerFound({ amount });
      await expectMalformed();
    },
  );

  it.each([['2026-02-30T00:00:00Z'], ['2026-11-23 07:05:00Z'], ['2026-11-23T07:05:00'], ['2026-11-23T07:05Z'], ['2026-11-23T24:00:00Z'], ['yesterday'], [1795392300000]])(
    'the time %j',
    async (occurred_at) => {
      answerFound({ occurred_at });
      await expectMalformed();
    },
  );

  it.each([
    ['an account with letters', { bank_code: '004', account: 'abc-1234' }],
    ['an account too short', { bank_code: '004', account: '12-3' }],
    ['an account too long', { bank_code: '004', account: '1'.repeat(21) }],
    ['a two-digit bank code', { bank_code: '04', account: '1234567890' }],
    ['a name over 200 characters', { bank_code: '004', account: '1234567890', name_th: 'ก'.repeat(201) }],
    ['a name that is not a string', { bank_code: '004', account: '1234567890', name_en: 42 }],
  ])('a sender with %s', async (_label, sender) => {
    answerFound({ sender });
    await expectMalformed();
  });

  it('an answer about another transaction reference', async () => {
    answerFound({ trans_ref: `${QUERY.trans_ref}X` });
    await expectMalformed();
  });

  it('an answer about another sending bank', async () => {
    answerFound({ sending_bank_code: '014' });
    await expectMalformed();
  });

  it('a 5 MB body, which is cut off rather than read', async () => {
    const total_bytes = 5 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let written_bytes = 0;
    // Written with backpressure and no length, so that the client can only tell the size by reading.
    provider.answer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"status":"not_found","padding":"');
      const writeMore = (): void => {
        while (written_bytes < total_bytes && !response.destroyed) {
          written_bytes += chunk.length;
          if (!response.write(chunk)) {
            response.once('drain', writeMore);
            return;
          }
        }
        if (!response.destroyed) response.end('"}');
      };
      writeMore();
    });
    expect(await verifier().verifyTransfer(QUERY)).toEqual(malformed);
    expect(provider.requests).toHaveLength(1);
    await vi.waitFor(() => expect(provider.requests[0]?.closed_early).toBe(true));
    expect(written_bytes).toBeLessThan(total_bytes);
  });

  it('a declared length over the limit, refused before reading', async () => {
    provider.answer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': 100_000 });
      response.write('{"status":"not_found"');
    });
    expect(await verifier({ max_response_bytes: 1_000 }).verifyTransfer(QUERY)).toEqual(malformed);
  });
});

describe('retries', () => {
  it('gives up on a provider slower than the timeout after max_attempts attempts, closing each connection', async () => {
    const timers: NodeJS.Timeout[] = [];
    provider.answer((_request, response) => {
      timers.push(setTimeout(() => sendJson(response, 200, { status: 'not_found' }), 2_000));
    });
    const started = performance.now();
    const lookup = await verifier().verifyTransfer(QUERY);
    const elapsed_ms = performance.now() - started;
    for (const timer of timers) clearTimeout(timer);
    expect(lookup).toEqual({ outcome: 'unavailable', reason: 'timeout' });
    expect(provider.requests).toHaveLength(3);
    // Three attempts of 150 ms, plus two backoffs of well under 100 ms each and scheduling slack.
    expect(elapsed_ms).toBeGreaterThanOrEqual(3 * TIMEOUT_MS - 10);
    expect(elapsed_ms).toBeLessThan(3 * TIMEOUT_MS + 600);
    await vi.waitFor(() => expect(provider.requests.every((request) => request.closed_early)).toBe(true));
  });

  it('times out a body that stalls after the headers', async () => {
    provider.answer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"status":');
    });
    expect(await verifier({ max_attempts: 1 }).verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'timeout' });
    expect(provider.requests).toHaveLength(1);
  });

  it('retries a 500 and returns the found transfer of the second attempt', async () => {
    provider.answer((request, response, index) => {
      if (index === 0) sendJson(response, 500, { error: 'scripted' });
      else sendJson(response, 200, foundAnswer({ sending_bank_code: '004', trans_ref: QUERY.trans_ref }));
    });
    const lookup = await verifier().verifyTransfer(QUERY);
    expect(lookup.outcome).toBe('found');
    expect(provider.requests).toHaveLength(2);
  });

  it('retries a dropped connection', async () => {
    provider.answer((_request, response, index) => {
      if (index === 0) response.socket?.destroy();
      else sendJson(response, 200, { status: 'not_found' });
    });
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'not_found' });
    expect(provider.requests).toHaveLength(2);
  });

  it('answers http_error after max_attempts 503s', async () => {
    answerStatus(503);
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(provider.requests).toHaveLength(3);
  });

  it('honours max_attempts', async () => {
    answerStatus(502);
    expect(await verifier({ max_attempts: 2 }).verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(provider.requests).toHaveLength(2);
  });

  it('retries a 429', async () => {
    provider.answer((_request, response, index) => {
      if (index < 2) sendJson(response, 429, { error: 'slow down' });
      else sendJson(response, 200, { status: 'not_found' });
    });
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'not_found' });
    expect(provider.requests).toHaveLength(3);
  });

  it('answers http_error when nothing listens, after max_attempts attempts', async () => {
    const closed = await startFakeSlipProvider();
    const url = closed.url;
    await closed.close();
    expect(await verifier({ url }).verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
  });

  it.each([400, 401, 403, 409, 422])('does not retry a %d', async (status) => {
    answerStatus(status);
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(provider.requests).toHaveLength(1);
  });

  it('does not follow a redirect', async () => {
    provider.answer((_request, response) => {
      response.writeHead(302, { location: `${provider.url}/v1/transfers/verify-elsewhere` });
      response.end();
    });
    expect(await verifier().verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(provider.requests.map((request) => request.path)).toEqual(['/v1/transfers/verify']);
  });
});

describe('circuit breaker', () => {
  const breakerOptions = { max_attempts: 1, breaker_threshold: 2, breaker_half_open_after_ms: 200 };
  const circuitOpen = { outcome: 'unavailable', reason: 'circuit_open' };
  const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));

  it('opens after the threshold, answers without the network, and closes after a successful trial', async () => {
    const subject = verifier(breakerOptions);
    answerStatus(503);
    expect(await subject.verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(await subject.verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(await subject.verifyTransfer(QUERY)).toEqual(circuitOpen);
    expect(provider.requests).toHaveLength(2);

    await sleep(250);
    answerFound();
    expect((await subject.verifyTransfer(QUERY)).outcome).toBe('found');
    expect((await subject.verifyTransfer(QUERY)).outcome).toBe('found');
    expect(provider.requests).toHaveLength(4);
  });

  it('counts a call with all its retries as one failure', async () => {
    const subject = verifier({ ...breakerOptions, max_attempts: 3 });
    answerStatus(503);
    expect(await subject.verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(provider.requests).toHaveLength(3);
    answerFound();
    expect((await subject.verifyTransfer(QUERY)).outcome).toBe('found');
  });

  it('counts malformed answers and timeouts as failures', async () => {
    const subject = verifier(breakerOptions);
    provider.answer((_request, response, index) => {
      if (index === 0) sendJson(response, 200, 'not json');
      // The second request never gets an answer; the client times out and closes it.
    });
    expect(await subject.verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'malformed_response' });
    expect(await subject.verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'timeout' });
    expect(await subject.verifyTransfer(QUERY)).toEqual(circuitOpen);
    expect(provider.requests).toHaveLength(2);
  });

  it('does not count found, not_found or a 401, which reset the count', async () => {
    const subject = verifier(breakerOptions);
    const script: Array<(response: http.ServerResponse) => void> = [
      (response) => sendJson(response, 503, {}),
      (response) => sendJson(response, 200, { status: 'not_found' }),
      (response) => sendJson(response, 503, {}),
      (response) => sendJson(response, 401, {}),
      (response) => sendJson(response, 503, {}),
      (response) => sendJson(response, 200, foundAnswer({ sending_bank_code: '004', trans_ref: QUERY.trans_ref })),
      (response) => sendJson(response, 503, {}),
    ];
    provider.answer((_request, response, index) => script[index]?.(response));
    const outcomes: string[] = [];
    for (let call = 0; call < script.length; call += 1) {
      const lookup = await subject.verifyTransfer(QUERY);
      outcomes.push(lookup.outcome === 'unavailable' ? lookup.reason : lookup.outcome);
    }
    expect(outcomes).toEqual(['http_error', 'not_found', 'http_error', 'http_error', 'http_error', 'found', 'http_error']);
    expect(provider.requests).toHaveLength(script.length);
  });

  it('lets one trial through when half open, answers other calls at once, and reopens if the trial fails', async () => {
    const subject = verifier(breakerOptions);
    answerStatus(503);
    await subject.verifyTransfer(QUERY);
    await subject.verifyTransfer(QUERY);
    await sleep(250);
    provider.answer((_request, response) => {
      setTimeout(() => sendJson(response, 503, {}), 50);
    });
    const trial = subject.verifyTransfer(QUERY);
    expect(await subject.verifyTransfer(QUERY)).toEqual(circuitOpen);
    expect(await trial).toEqual({ outcome: 'unavailable', reason: 'http_error' });
    expect(await subject.verifyTransfer(QUERY)).toEqual(circuitOpen);
    expect(provider.requests).toHaveLength(3);
  });
});

describe('configuration', () => {
  it('without a provider answers not_configured without any I/O', async () => {
    const fetchSpy = vi.spyOn(globalThis, 'fetch');
    try {
      const subject = createBankVerifierFromConfig(null);
      expect(await subject.verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'not_configured' });
      expect(fetchSpy).not.toHaveBeenCalled();
    } finally {
      fetchSpy.mockRestore();
    }
  });

  it('with a provider makes the HTTP verifier', async () => {
    const subject = createBankVerifierFromConfig({ url: provider.url, key: KEY, timeout_ms: 1_000 });
    expect(subject).toBeInstanceOf(HttpBankVerifier);
    provider.answer((_request, response) => sendJson(response, 200, { status: 'not_found' }));
    expect(await subject.verifyTransfer(QUERY)).toEqual({ outcome: 'not_found' });
  });

  it.each([
    ['a URL with credentials', { url: `http://user:${KEY}@127.0.0.1:1` }],
    ['a URL of another scheme', { url: 'ftp://127.0.0.1/' }],
    ['a key with a line break', { key: `${KEY}\r\nX-Injected: 1` }],
    ['a zero timeout', { timeout_ms: 0 }],
  ])('refuses %s without repeating the key', (_label, options) => {
    let message = '';
    try {
      verifier(options);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/^invalid slip verifier configuration/);
    expect(message).not.toContain(KEY);
  });
});
