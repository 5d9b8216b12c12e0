import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, scrubText } from '../../src/platform/logger.ts';
import { createTestApp } from '../support/app.ts';
import { testWriteRoutes } from '../support/test-routes.ts';

function capture(): { stream: Writable; lines: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { stream, lines: () => chunks.join('') };
}

describe('log redaction', () => {
  it('removes secrets from known fields and from free text', () => {
    const { stream, lines } = capture();
    const logger = createLogger('info', stream);
    logger.info(
      {
        api_key: 'sk_test_AAAAAAAAAAAAAAAAAAAAAAAA',
        signing_secret: 'sig_test_BBBBBBBBBBBBBBBB',
        req: { headers: { authorization: 'Bearer sk_live_CCCCCCCCCCCCCCCCCCCCCCC', 'pg-signature': 'v1=abc' } },
        slip: { token: 'eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl', qr_payload: '00020101021229370016A000000677010111' },
        sender: { account_number: '1234567890' },
      },
      'key sk_live_DDDDDDDDDDDDDDDDDDDD for account 0123456789 and token bo_EEEEEEEEEEEEEEEEEEEEEEEE',
    );
    const text = lines();
    for (const secret of ['AAAA', 'BBBB', 'CCCC', 'DDDD', 'EEEE', '1234567890', '0123456789', '00020101', 'c2lnbmF0dXJl', 'v1=abc']) {
      expect(text, secret).not.toContain(secret);
    }
    expect(text).toContain('[redacted]');
    expect(scrubText('amount 10000 satang')).toBe('amount 10000 satang');
  });

  it('request logs carry request_id, never the Authorization header, signature or a secret in an error', async () => {
    const { stream, lines } = capture();
    const app = await createTestApp({ extra_modules: [testWriteRoutes()], logger: createLogger('info', stream) });
    try {
      const ok = await app.signed({ url: '/v1/pay/banks' });
      const failed = await app.signed({ method: 'POST', url: '/v1/pay/test-writes', body: { amount_minor: 1, fail_with: 'plain_error' }, idempotency_key: 'log-1' });
      expect(failed.statusCode).toBe(500);
      const text = lines();
      expect(text).toContain(String(ok.headers['request-id']));
      expect(text).toContain(String(failed.headers['request-id']));
      expect(text).toContain('"level":"error"');
      expect(text).not.toContain('sk_test_');
      expect(text).not.toContain('sig_test_');
      expect(text).not.toContain(app.sandbox.api_key.slice(8));
      expect(text).not.toContain('pg-signature');
    } finally {
      await app.close();
    }
  });
});
