import crypto from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, errorOf, type TestApp } from '../support/app.ts';
import { createDeposit, nextReference, sandboxTransfer, uploadJson, postToUploadUrl } from '../support/slips.ts';
import { decodeJson } from '../../src/http/json-body.ts';
import { duplicateKeyProblems, MAX_SCAN_DEPTH } from '../../src/http/json-duplicate-keys.ts';
import { ApiError } from '../../src/platform/errors.ts';
import { hasDuplicateKeyByTokens } from '../support/json-oracle.ts';

/**
 * Duplicate keys in JSON bodies (issue 28, item 8): a body that names one key twice in one object, at
 * any depth and whatever escapes spell the key, is refused with 422 `validation_error`
 * (`reason: 'duplicate_key'`) on every route that reads JSON, so that a merchant's validator (which may
 * keep the first) and this service (whose parser kept the last) cannot read two requests out of one
 * signed body. Nothing is created, and the Idempotency-Key stays free for the corrected request, as
 * after every other validation error.
 */

let app: TestApp;

beforeAll(async () => {
  app = await createTestApp();
});
afterAll(async () => {
  await app.close();
});

const RATE_HEADERS = ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'ratelimit-policy', 'x-ratelimit-scope'] as const;

let accountCounter = 0;

/** A deposit-creation body as raw text, so that a test can repeat a key where it wants. */
function depositText(reference: string, options: { sender?: string; extra?: string } = {}): string {
  accountCounter += 1;
  const account = `77${String(accountCounter).padStart(8, '0')}`;
  const sender = options.sender ?? `{"bank_code":"004","account_number":"${account}","account_name_th":"สมหญิง รักไทย"}`;
  return `{"amount_minor":10000,"currency":"THB","merchant_reference":"${reference}","end_user_ref":"user-${reference}",`
    + `"sender":${sender},"client":{"device_fingerprint":"fp-${reference}","ip":"203.0.113.7","user_agent":"dup-test"}${options.extra ?? ''}}`;
}

function postDeposit(body: string, idempotency_key: string) {
  return app.signed({ method: 'POST', url: '/v1/pay/deposits', idempotency_key, body });
}

async function depositCount(reference: string): Promise<number> {
  const { rows } = await app.testDatabase.database.query<{ count: string | number }>(
    'SELECT count(*) AS count FROM deposit_orders WHERE merchant_reference = $1',
    [reference],
  );
  return Number(rows[0]?.count ?? 0);
}

/**
 * Sends `duplicated` (refused with `fields`), then the corrected `valid` body. The refusal created nothing, and it
 * is the key's answer (spec, Common request rules 2: only a 429 leaves the key unused): the same bytes under the
 * key replay it, the corrected body under the key is 409 `idempotency_key_reused`, and under a new key it runs.
 */
async function expectRefusedThenRetried(reference: string, duplicated: string, valid: string, fields: unknown[]): Promise<void> {
  const key = `dup-${crypto.randomUUID()}`;
  const refused = await postDeposit(duplicated, key);
  expect(refused.statusCode, refused.body).toBe(422);
  expect(errorOf(refused)).toMatchObject({ code: 'validation_error', details: { fields } });
  for (const header of RATE_HEADERS) expect(refused.headers[header], header).toBeDefined();
  expect(await depositCount(reference)).toBe(0);
  const again = await postDeposit(duplicated, key);
  expect(again.statusCode).toBe(422);
  expect(again.headers['idempotent-replay']).toBe('true');
  expect(again.body).toBe(refused.body);
  const corrected = await postDeposit(valid, key);
  expect(errorOf(corrected).code).toBe('idempotency_key_reused');
  expect(await depositCount(reference)).toBe(0);

  const freshKey = `dup-${crypto.randomUUID()}`;
  const retried = await postDeposit(valid, freshKey);
  expect(retried.statusCode, retried.body).toBe(201);
  expect(retried.headers['idempotent-replay']).toBeUndefined();
  expect(await depositCount(reference)).toBe(1);
  const replayed = await postDeposit(valid, freshKey);
  expect(replayed.statusCode).toBe(201);
  expect(replayed.headers['idempotent-replay']).toBe('true');
}

describe('merchant routes: POST /v1/pay/deposits', () => {
  it('a top-level duplicate is 422 duplicate_key naming the key, with the rate headers; nothing is created and the key keeps the refusal', async () => {
    const reference = nextReference('dup-top');
    const duplicated = depositText(reference, { extra: ',"amount_minor":9900000' });
    await expectRefusedThenRetried(reference, duplicated, depositText(reference), [{ path: 'amount_minor', reason: 'duplicate_key' }]);
  });

  it('a duplicate inside sender is named by its path', async () => {
    const reference = nextReference('dup-sender');
    const duplicated = depositText(reference, {
      sender: '{"bank_code":"004","account_number":"0911111111","account_name_th":"สมหญิง รักไทย","bank_code":"002"}',
    });
    await expectRefusedThenRetried(reference, duplicated, depositText(reference), [{ path: 'sender.bank_code', reason: 'duplicate_key' }]);
  });

  it('a duplicate inside metadata is named by its path', async () => {
    const reference = nextReference('dup-metadata');
    const duplicated = depositText(reference, { extra: ',"metadata":{"order_id":"A-1","channel":"web","order_id":"A-2"}' });
    const valid = depositText(reference, { extra: ',"metadata":{"order_id":"A-1","channel":"web"}' });
    await expectRefusedThenRetried(reference, duplicated, valid, [{ path: 'metadata.order_id', reason: 'duplicate_key' }]);
  });

  it('keys equal after unescaping are duplicates (\\u0061 is a, \\/ is /)', async () => {
    const reference = nextReference('dup-escaped');
    const duplicated = depositText(reference, {
      extra: String.raw`,"\u0061mount_minor":20000,"metadata":{"a\/b":"1","a/b":"2"}`,
    });
    await expectRefusedThenRetried(reference, duplicated, depositText(reference), [
      { path: 'amount_minor', reason: 'duplicate_key' },
      { path: 'metadata.a/b', reason: 'duplicate_key' },
    ]);
  });
});

describe('back-office routes', () => {
  it('POST /v1/bo/brands with a repeated name is 422 duplicate_key and creates no brand', async () => {
    const countBrands = async () => {
      const { rows } = await app.testDatabase.database.query<{ count: string | number }>('SELECT count(*) AS count FROM brands');
      return Number(rows[0]?.count ?? 0);
    };
    const before = await countBrands();
    const response = await app.instance.app.inject({
      method: 'POST',
      url: '/v1/bo/brands',
      headers: { authorization: `Bearer ${app.operator_token}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
      payload: '{"name":"Brand Shown To The Validator","name":"Brand Created Here"}',
    });
    expect(response.statusCode, response.body).toBe(422);
    expect(errorOf(response)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'name', reason: 'duplicate_key' }] } });
    for (const header of RATE_HEADERS) expect(response.headers[header], header).toBeDefined();
    expect(await countBrands()).toBe(before);
  });
});

describe('slip capability routes', () => {
  it('a JSON slip with a repeated field is 422 duplicate_key, stores no receipt, and the same key then takes the slip', async () => {
    const order = await createDeposit(app, { amount_minor: 12_000 });
    const transfer = await sandboxTransfer(app, order);
    const receipts = async () => {
      const { rows } = await app.testDatabase.database.query<{ count: string | number }>('SELECT count(*) AS count FROM slip_receipts WHERE deposit_id = $1', [order.id]);
      return Number(rows[0]?.count ?? 0);
    };
    const key = crypto.randomUUID();
    const image = JSON.stringify(transfer.slip.image_base64);
    const payload = JSON.stringify(transfer.slip.payload);
    const refused = await uploadJson(app, order.slip_upload, `{"image_base64":${image},"payload":"000201","payload":${payload}}`, { idempotency_key: key });
    expect(refused.statusCode, refused.body).toBe(422);
    expect(errorOf(refused)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'payload', reason: 'duplicate_key' }] } });
    expect(await receipts()).toBe(0);

    const taken = await uploadJson(app, order.slip_upload, `{"image_base64":${image},"payload":${payload}}`, { idempotency_key: key });
    expect(taken.statusCode, taken.body).toBe(202);
    expect(taken.headers['idempotent-replay']).toBeUndefined();
    expect(await receipts()).toBe(1);
  });

  it('a late-slip claim with a repeated field is 422 duplicate_key before the order is looked at', async () => {
    const order = await createDeposit(app, { amount_minor: 13_000 });
    const response = await postToUploadUrl(app, order.slip_upload, '{"note":"I paid at 10:02","trans_ref":"ABC123","note":"I never paid"}', 'application/json', {
      upload_url: order.slip_upload.upload_url.replace(/\/slip$/, '/claims'),
    });
    expect(response.statusCode, response.body).toBe(422);
    expect(errorOf(response)).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'note', reason: 'duplicate_key' }] } });
  });
});

describe('duplicateKeyProblems (the scanner)', () => {
  const duplicate = (path: string) => ({ path, reason: 'duplicate_key' });
  const cases: [string, string, { path: string; reason: string }[]][] = [
    ['distinct keys', '{"a":1,"b":2}', []],
    ['a repeated key', '{"a":1,"a":2}', [duplicate('a')]],
    ['whitespace around the tokens', '{ "a" : 1 ,\n\t"a" : 2 }', [duplicate('a')]],
    ['the same key at different levels', '{"a":{"a":{"a":1}},"b":{"a":2}}', []],
    ['the same key in sibling objects', '{"x":{"id":1},"y":{"id":2}}', []],
    ['a repeated key whose values are objects', '{"a":{"b":1},"a":{"b":2}}', [duplicate('a')]],
    ['a repeated key after an array value', '{"a":[1,{"a":1},[{}]],"a":2}', [duplicate('a')]],
    ['keys in an array of objects', '{"items":[{"id":1},{"id":2,"sku":"x","id":3}]}', [duplicate('items.1.id')]],
    ['objects in a top-level array', '[{"id":1},{"id":2}]', []],
    ['a duplicate in a top-level array', '[{"a":1},{"b":1,"b":2}]', [duplicate('1.b')]],
    ['string values are not keys', '{"a":"b","b":"a",  "c":["a","a"]}', []],
    ['quotes, braces and commas inside a string', String.raw`{"a":"}\",\"a\":[{","b":"{\"b\":1}"}`, []],
    ['an escaped backslash before a closing quote', String.raw`{"a":"\\","a":1}`, [duplicate('a')]],
    ['an escaped backslash, then an escaped quote', String.raw`{"x":"\\\"","x":1}`, [duplicate('x')]],
    ['a key ending in a backslash is another key', String.raw`{"a\\":1,"a":2}`, []],
    ['a unicode escape equal to a plain key', String.raw`{"a":1,"\u0061":2}`, [duplicate('a')]],
    ['an escaped solidus equal to a plain one', String.raw`{"a/b":1,"a\/b":2}`, [duplicate('a/b')]],
    ['a surrogate pair spelled two ways', String.raw`{"😀":1,"\ud83d\ude00":2}`, [duplicate('😀')]],
    ['empty containers', '{"a":{},"b":[],"c":[[],{}],"d":{}}', []],
    ['the empty key', '{"":1,"":2}', [duplicate('$')]],
    ['a key that is not storable text is not echoed', String.raw`{"k":{"\u0000":1,"\u0000":2}}`, [duplicate('k.(key)')]],
    ['a key three times is named once', '{"a":1,"a":2,"a":3}', [duplicate('a')]],
    ['two duplicates are both named', '{"a":1,"b":{"c":1,"c":2},"a":2}', [duplicate('b.c'), duplicate('a')]],
    ['scalars hold no keys', '"a"', []],
  ];
  it.each(cases)('%s', (_name, text, expected) => {
    expect(JSON.parse(text)).toBeDefined();
    expect(duplicateKeyProblems(text)).toEqual(expected);
  });

  it('an object with many keys (kept in a Set) still finds its duplicate', () => {
    const keys = Array.from({ length: 100 }, (_, index) => `"k${index}":${index}`);
    expect(duplicateKeyProblems(`{${keys.join(',')}}`)).toEqual([]);
    expect(duplicateKeyProblems(`{${keys.join(',')},"k0":1,"k99":2}`)).toEqual([duplicate('k0'), duplicate('k99')]);
  });

  it('names at most 20 problems', () => {
    const text = `{${Array.from({ length: 50 }, (_, index) => `"k${index}":1,"k${index}":2`).join(',')}}`;
    expect(duplicateKeyProblems(text)).toHaveLength(20);
  });

  it(`nests ${MAX_SCAN_DEPTH} containers, and refuses one more without recursion`, () => {
    const nested = (depth: number) => '['.repeat(depth - 1) + '{"a":1,"a":2}' + ']'.repeat(depth - 1);
    expect(duplicateKeyProblems(nested(MAX_SCAN_DEPTH))).toEqual([duplicate(`${'0.'.repeat(MAX_SCAN_DEPTH - 1)}a`)]);
    expect(duplicateKeyProblems(nested(MAX_SCAN_DEPTH + 1))).toEqual([{ path: '0.'.repeat(MAX_SCAN_DEPTH).slice(0, -1), reason: 'too_deeply_nested' }]);
  });
});

describe('duplicateKeyProblems against an independent tokeniser', () => {
  // Keys chosen to collide after unescaping and to hide quotes, backslashes and braces.
  const keyText = fc.constantFrom('"a"', String.raw`"\u0061"`, '"b"', String.raw`"a\\"`, String.raw`"\""`, String.raw`"\/"`, '"/"', '""', '"{"', String.raw`"a\"b"`);
  const { value } = fc.letrec<{ value: string; object: string; array: string }>((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom('1', 'null', '"x"', String.raw`"}\",\"a\":{"`, String.raw`"\\"`, '[]', '{}'),
      tie('object'),
      tie('array'),
    ),
    object: fc.array(fc.tuple(keyText, tie('value')), { maxLength: 4 }).map((members) => `{${members.map(([key, item]) => `${key}:${item}`).join(',')}}`),
    array: fc.array(tie('value'), { maxLength: 3 }).map((items) => `[${items.join(',')}]`),
  }));

  it('finds a duplicate exactly when the tokeniser does', () => {
    fc.assert(
      fc.property(value, (text) => {
        expect(() => JSON.parse(text)).not.toThrow();
        const found = duplicateKeyProblems(text).some((problem) => problem.reason === 'duplicate_key');
        expect(found, text).toBe(hasDuplicateKeyByTokens(text));
      }),
      { numRuns: 3_000 },
    );
  });
});

describe('decodeJson', () => {
  const refusal = (text: string | Buffer): ApiError => {
    try {
      decodeJson(Buffer.isBuffer(text) ? text : Buffer.from(text));
    } catch (error) {
      if (error instanceof ApiError) return error;
      throw error;
    }
    throw new Error('decodeJson accepted the body');
  };

  it('a duplicate in valid JSON is validation_error; a body that is not JSON stays malformed_json first', () => {
    expect(refusal('{"a":1,"a":2}')).toMatchObject({ code: 'validation_error', details: { fields: [{ path: 'a', reason: 'duplicate_key' }] } });
    expect(refusal('{"a":1,"a":2')).toMatchObject({ code: 'malformed_json', details: {} });
    expect(refusal('{"a":1,"a":2}}')).toMatchObject({ code: 'malformed_json', details: {} });
  });

  it('keeps invalid UTF-8 and prototype keys as they were', () => {
    expect(refusal(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]))).toMatchObject({ code: 'malformed_json', details: { reason: 'invalid_utf8' } });
    expect(refusal('{"__proto__":{"x":1}}').code).toBe('malformed_json');
    expect(refusal('{"__proto__":1,"__proto__":2}').code).toBe('malformed_json');
    expect(refusal('{"constructor":{"prototype":{"x":1}}}').code).toBe('malformed_json');
  });

  it('100,000 nested arrays or objects are a catalogue answer, not a stack overflow', () => {
    for (const [open, close] of [['[', ']'], ['{"a":', '}']] as const) {
      const text = open.repeat(100_000) + (open === '[' ? '' : '1') + close.repeat(100_000);
      expect(refusal(text)).toMatchObject({ code: 'validation_error', details: { fields: [{ reason: 'too_deeply_nested' }] } });
    }
  });

  it('returns what JSON.parse returns when every key is distinct (a leading byte-order mark is dropped as before)', () => {
    const text = '{"a":[1,{"a":"x"}],"b":{"a":null}}';
    expect(decodeJson(Buffer.from(text))).toEqual(JSON.parse(text));
    expect(decodeJson(Buffer.from(`\uFEFF${text}`))).toEqual(JSON.parse(text));
    expect(decodeJson(Buffer.from('"text"'))).toBe('text');
  });
});
