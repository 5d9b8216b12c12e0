import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { testVectorDocument } from '../../src/test-vectors/vectors.ts';
import { parseSignatureHeader, signWebhookPayload, signedBytes } from '../../src/webhooks/signing.ts';
import { MAX_ATTEMPTS, RETRY_DELAYS_MS, nextAttemptAfter } from '../../src/webhooks/types.ts';
import { HOUR_MS, MINUTE_MS } from '../../src/platform/time.ts';
import { checkEndpointUrl, defaultAddressPolicy, isLoopbackAddress, isPublicAddress, schemeAllowed } from '../../src/webhooks/url-policy.ts';
import { classifyNetworkError } from '../../src/webhooks/http-client.ts';
import { MemoryReceiverStore, ReferenceReceiver, SigningKeyCache, parseSignature, type PublishedKey, type ReceivedEvent } from '../../examples/webhook-receiver/receiver.ts';

/**
 * The parts of webhook delivery that need no database: the one signing function against the
 * published test vectors, the retry schedule, the address rules, and the reference receiver's
 * decisions (the spec's out-of-order cases A, B and C among them).
 */

// The published seed of the test vectors (RFC 8032, test 1): public on purpose, it signs vectors only.
const TEST_VECTOR_SEED_HEX = '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60';
const PKCS8_ED25519_PREFIX_HEX = '302e020100300506032b657004220420';

interface Vector {
  raw_body_base64: string;
  t: number;
  event_id: string;
  kid: string;
  signature: string;
  signature_header: string;
  public_key: string;
}

describe('the webhook signing function', () => {
  const testKey = crypto.createPrivateKey({ key: Buffer.from(PKCS8_ED25519_PREFIX_HEX + TEST_VECTOR_SEED_HEX, 'hex'), format: 'der', type: 'pkcs8' });
  const vectors = (testVectorDocument().vectors as Record<string, Vector>);

  it.each(['thai', 'url', 'emoji'])('reproduces the published %s vector byte for byte', (name) => {
    const vector = vectors[name]!;
    const signed = signWebhookPayload({
      private_key: testKey,
      kid: vector.kid,
      t: vector.t,
      event_id: vector.event_id,
      body: Buffer.from(vector.raw_body_base64, 'base64'),
    });
    expect(signed.signature).toBe(vector.signature);
    expect(signed.header).toBe(vector.signature_header);
    expect(signed.signature).not.toMatch(/=/);
    // And an independent check with the vector's public key only.
    const publicKey = crypto.createPublicKey({ key: Buffer.from(vector.public_key, 'base64'), format: 'der', type: 'spki' });
    const bytes = Buffer.concat([Buffer.from(`v1.${vector.t}.${vector.event_id}.`), Buffer.from(vector.raw_body_base64, 'base64')]);
    expect(crypto.verify(null, bytes, publicKey, Buffer.from(vector.signature, 'base64url'))).toBe(true);
    expect(signedBytes(vector.t, vector.event_id, Buffer.from(vector.raw_body_base64, 'base64'))).toEqual(bytes);
  });

  it('parses the header by name, in any order, and refuses repeats and junk', () => {
    expect(parseSignatureHeader('v1,kid=k1,t=1785542400,s=abc_-1')).toEqual({ kid: 'k1', t: 1785542400, s: 'abc_-1' });
    expect(parseSignatureHeader('s=abc,t=12,v1,kid=k1')).toEqual({ kid: 'k1', t: 12, s: 'abc' });
    expect(parseSignatureHeader('v1,kid=k1,kid=k2,t=1,s=a')).toBeNull();
    expect(parseSignatureHeader('kid=k1,t=1,s=a')).toBeNull();
    expect(parseSignatureHeader('v1,kid=k1,t=abc,s=a')).toBeNull();
    expect(parseSignatureHeader('v1,kid=k1,t=1,s=a+b/')).toBeNull();
    expect(parseSignature('t=1,v1,s=a,kid=x')).toEqual({ kid: 'x', t: 1, s: 'a' });
  });
});

describe('the retry schedule', () => {
  it('is 11 attempts over exactly 92 hours 36 minutes, fixed', () => {
    expect(MAX_ATTEMPTS).toBe(11);
    expect(RETRY_DELAYS_MS).toHaveLength(10);
    expect(RETRY_DELAYS_MS.reduce((sum, delay) => sum + delay, 0)).toBe(92 * HOUR_MS + 36 * MINUTE_MS);
    const start = new Date('2026-08-01T00:00:00.000Z');
    expect(nextAttemptAfter(start, 1)?.toISOString()).toBe('2026-08-01T00:01:00.000Z');
    expect(nextAttemptAfter(start, 10)?.toISOString()).toBe('2026-08-02T02:00:00.000Z');
    expect(nextAttemptAfter(start, 11)).toBeNull();
  });
});

describe('receiver address rules', () => {
  it('knows loopback, private, link-local and mapped addresses', () => {
    for (const address of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1']) expect(isLoopbackAddress(address), address).toBe(true);
    for (const address of ['10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', 'fe80::1', 'fc00::1', '100.64.0.1', '0.0.0.0', '::', '224.0.0.1', '::ffff:10.0.0.1', '64:ff9b::a00:1']) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    for (const address of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '64:ff9b::808:808']) expect(isPublicAddress(address), address).toBe(true);
  });

  it('judges IPv6 forms that carry an IPv4 address by that address: mapped, compatible, NAT64, 6to4, Teredo, any spelling', () => {
    const carryingPrivate = [
      '0:0:0:0:0:ffff:7f00:1', // IPv4-mapped, uncompressed
      '::ffff:0a00:0001',
      '::10.0.0.1', // IPv4-compatible
      '::a9fe:a9fe', // IPv4-compatible 169.254.169.254 (cloud metadata)
      '0064:ff9b:0000:0000:0000:0000:0a00:0001', // NAT64, uncompressed
      '64:ff9b::192.168.1.1',
      '2002:7f00:1::', // 6to4 of 127.0.0.1
      '2002:a9fe:a9fe::1', // 6to4 of 169.254.169.254
      '2002:c0a8:0101:0:0:0:0:1', // 6to4 of 192.168.1.1
      '2001:0:a00:1::', // Teredo, server 10.0.0.1
      '2001:0:808:808::f5ff:fffe', // Teredo, client 10.0.0.1 (inverted)
    ];
    for (const address of carryingPrivate) expect(isPublicAddress(address), address).toBe(false);
    for (const address of ['2002:808:808::1', '2001:0:808:808::f7f7:f7f7', '::ffff:8.8.8.8']) expect(isPublicAddress(address), address).toBe(true);
    // Only the mapped form reaches the host itself; a relay form of 127.0.0.1 is neither loopback nor public.
    expect(isLoopbackAddress('0:0:0:0:0:ffff:127.0.0.1')).toBe(true);
    for (const address of ['2002:7f00:1::', '64:ff9b::7f00:1']) {
      expect(isLoopbackAddress(address), address).toBe(false);
      expect(defaultAddressPolicy({ sandbox_loopback: true }).allows(address, false), address).toBe(false);
    }
  });

  it('allows loopback to sandbox endpoints only when the operator turned it on, and never to live ones', () => {
    const off = defaultAddressPolicy({ sandbox_loopback: false });
    const on = defaultAddressPolicy({ sandbox_loopback: true });
    expect(off.allows('127.0.0.1', false)).toBe(false);
    expect(on.allows('127.0.0.1', false)).toBe(true);
    expect(on.allows('127.0.0.1', true)).toBe(false);
    expect(on.allows('10.0.0.1', false)).toBe(false);
    expect(on.allows('8.8.8.8', true)).toBe(true);
  });

  it('checks URLs when they are written', async () => {
    const resolve = async (host: string) => (host === 'hooks.example.com' ? ['93.184.216.34'] : host === 'inside.example.com' ? ['10.0.0.5'] : host === 'localhost' ? ['127.0.0.1'] : []);
    const live = { livemode: true, sandbox_loopback: true, policy: defaultAddressPolicy({ sandbox_loopback: true }), resolve };
    const sandbox = { ...live, livemode: false };
    const sandboxOff = { ...sandbox, sandbox_loopback: false, policy: defaultAddressPolicy({ sandbox_loopback: false }) };
    expect(await checkEndpointUrl('https://hooks.example.com/pg', live)).toEqual({ ok: true, url: 'https://hooks.example.com/pg' });
    const reason = async (url: string, options: typeof live) => {
      const checked = await checkEndpointUrl(url, options);
      return checked.ok ? 'ok' : checked.reason;
    };
    expect(await reason('http://hooks.example.com/pg', live)).toBe('must_be_https');
    expect(await reason('https://inside.example.com/pg', live)).toBe('address_not_allowed');
    expect(await reason('https://127.0.0.1/pg', live)).toBe('address_not_allowed');
    expect(await reason('https://[::1]/pg', live)).toBe('address_not_allowed');
    expect(await reason('https://169.254.169.254/latest', live)).toBe('address_not_allowed');
    expect(await reason('https://nowhere.invalid/pg', live)).toBe('host_not_resolvable');
    expect(await reason('https://user:pass@hooks.example.com/pg', live)).toBe('credentials_not_allowed');
    expect(await reason('https://hooks.example.com/pg#x', live)).toBe('fragment_not_allowed');
    expect(await reason('ftp://hooks.example.com/pg', live)).toBe('must_be_https');
    expect(await reason('not a url', live)).toBe('invalid_url');
    expect(await reason('http://127.0.0.1:9000/pg', sandbox)).toBe('ok');
    expect(await reason('http://localhost:9000/pg', sandbox)).toBe('ok');
    expect(await reason('https://127.0.0.1:9000/pg', sandbox)).toBe('ok');
    expect(await reason('http://127.0.0.1:9000/pg', sandboxOff)).toBe('must_be_https');
    expect(await reason('https://127.0.0.1:9000/pg', sandboxOff)).toBe('address_not_allowed');
    expect(await reason('http://hooks.example.com/pg', sandbox)).toBe('must_be_https');
    expect(schemeAllowed(new URL('http://127.0.0.1/x'), false, true)).toBe(true);
    expect(schemeAllowed(new URL('http://127.0.0.1/x'), true, true)).toBe(false);
    expect(schemeAllowed(new URL('http://example.com/x'), false, true)).toBe(false);
  });

  it('names network failures with stable words', () => {
    expect(classifyNetworkError({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' })).toBe('tls_certificate_invalid');
    expect(classifyNetworkError({ code: 'ECONNRESET' })).toBe('connection_closed');
    expect(classifyNetworkError({ code: 'ECONNREFUSED' })).toBe('connection_refused');
    expect(classifyNetworkError({ code: 'ERR_SSL_WRONG_VERSION_NUMBER' })).toBe('tls_handshake_failed');
    expect(classifyNetworkError(new Error('x'))).toBe('network_error');
  });
});

describe('the reference receiver', () => {
  const keyPair = crypto.generateKeyPairSync('ed25519');
  const published: PublishedKey = {
    kid: 'whk_TEST',
    alg: 'Ed25519',
    public_key: keyPair.publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
    format: 'spki_der_base64',
    raw_public_key: '',
    status: 'active',
    not_before: '2026-08-01T00:00:00.000Z',
    not_after: null,
  };
  const now = { ms: Date.parse('2026-08-01T00:00:00.000Z') };
  let sequence = 0;

  function receiverWith(keys: PublishedKey[] = [published], fetched: { count: number } = { count: 0 }) {
    const cache = new SigningKeyCache(async () => {
      fetched.count += 1;
      return { keys };
    }, () => now.ms);
    return new ReferenceReceiver({ livemode: false, keys: cache, now_ms: () => now.ms, store: new MemoryReceiverStore() });
  }

  function delivery(type: string, object: Record<string, unknown>, options: { kid?: string; t?: number; livemode?: boolean; key?: crypto.KeyObject } = {}) {
    sequence += 1;
    const event = {
      id: `evt_TEST${sequence}`,
      object: 'event',
      type,
      api_version: '2026-08-01',
      livemode: options.livemode ?? false,
      created_at: '2026-08-01T00:00:00.000Z',
      sequence,
      account: { merchant_id: 'mch_X', white_label_id: 'wl_X' },
      data: { object, previous_attributes: null },
    };
    const body = Buffer.from(JSON.stringify(event));
    const t = options.t ?? Math.floor(now.ms / 1000);
    const signed = signWebhookPayload({ private_key: options.key ?? keyPair.privateKey, kid: options.kid ?? published.kid, t, event_id: event.id, body });
    return { event, body, headers: { 'x-pg-signature': signed.header, 'x-pg-event-id': event.id } };
  }

  it('case A: an older expired after settled leaves the order settled and answers 200', async () => {
    const receiver = receiverWith();
    const settled = delivery('deposit.settled', { object: 'deposit', id: 'dep_A', version: 4, status: 'settled' });
    const expired = delivery('deposit.expired', { object: 'deposit', id: 'dep_A', version: 3, status: 'expired' });
    expect((await receiver.handle(settled.body, settled.headers)).body.outcome).toBe('applied');
    const late = await receiver.handle(expired.body, expired.headers);
    expect(late).toEqual({ status: 200, body: { ok: true, outcome: 'stale' } });
    expect(receiver.store.object('deposit', 'dep_A')?.status).toBe('settled');
  });

  it('case B: an older settled after reversed applies nothing (no credit, no release) and answers 200', async () => {
    const receiver = receiverWith();
    const reversed = delivery('deposit.reversed', { object: 'deposit', id: 'dep_B', version: 6, status: 'reversed' });
    const settled = delivery('deposit.settled', { object: 'deposit', id: 'dep_B', version: 5, status: 'settled' });
    await receiver.handle(reversed.body, reversed.headers);
    const appliedBefore = receiver.store.applied.length;
    expect((await receiver.handle(settled.body, settled.headers)).status).toBe(200);
    expect(receiver.store.applied).toHaveLength(appliedBefore);
    expect(receiver.store.object('deposit', 'dep_B')?.status).toBe('reversed');
  });

  it('case C: withdrawal.filled chunks out of order leave remaining_minor of the highest version', async () => {
    const receiver = receiverWith();
    const chunks = [3, 1, 4, 2].map((version) =>
      delivery('withdrawal.filled', { object: 'withdrawal', id: 'wdr_C', version, status: 'partially_filled', remaining_minor: 10_000 - version * 1_000 }),
    );
    for (const chunk of chunks) expect((await receiver.handle(chunk.body, chunk.headers)).status).toBe(200);
    expect(receiver.store.object('withdrawal', 'wdr_C')?.remaining_minor).toBe(6_000);
  });

  it('answers 200 and does nothing for a duplicate event id', async () => {
    const receiver = receiverWith();
    const first = delivery('balance.credited', { object: 'balance_transaction', id: 'btxn_1', amount_minor: 500 });
    expect((await receiver.handle(first.body, first.headers)).body.outcome).toBe('applied');
    expect(await receiver.handle(first.body, first.headers)).toEqual({ status: 200, body: { ok: true, outcome: 'duplicate' } });
    expect(receiver.store.applied.filter((entry) => entry.event_id === first.event.id)).toHaveLength(1);
  });

  it('refuses a forged, tampered, skewed, misrouted or wrong-environment delivery', async () => {
    const receiver = receiverWith();
    const good = delivery('deposit.created', { object: 'deposit', id: 'dep_R', version: 1, status: 'awaiting_payment' });
    const tampered = Buffer.from(good.body.toString().replace('awaiting_payment', 'settled'));
    expect((await receiver.handle(tampered, good.headers)).body.error).toBe('signature_invalid');
    const forged = delivery('deposit.created', { object: 'deposit', id: 'dep_R', version: 1 }, { key: crypto.generateKeyPairSync('ed25519').privateKey });
    expect((await receiver.handle(forged.body, forged.headers)).body.error).toBe('signature_invalid');
    const old = delivery('deposit.created', { object: 'deposit', id: 'dep_R', version: 1 }, { t: Math.floor(now.ms / 1000) - 301 });
    expect((await receiver.handle(old.body, old.headers)).body.error).toBe('timestamp_out_of_window');
    const edge = delivery('deposit.created', { object: 'deposit', id: 'dep_E', version: 1 }, { t: Math.floor(now.ms / 1000) + 300 });
    expect((await receiver.handle(edge.body, edge.headers)).status).toBe(200);
    const live = delivery('deposit.created', { object: 'deposit', id: 'dep_L', version: 1 }, { livemode: true });
    expect((await receiver.handle(live.body, live.headers)).body.error).toBe('livemode_mismatch');
    const other = delivery('deposit.created', { object: 'deposit', id: 'dep_M', version: 1 });
    expect((await receiver.handle(other.body, { ...other.headers, 'x-pg-event-id': good.event.id })).body.error).toBe('signature_invalid');
    expect((await receiver.handle(good.body, { 'x-pg-event-id': good.event.id })).body.error).toBe('signature_missing');
  });

  it('refetches the keys once on an unknown kid, at most every 10 seconds, and at least daily', async () => {
    const rotated = crypto.generateKeyPairSync('ed25519');
    const keys: PublishedKey[] = [published];
    const fetched = { count: 0 };
    const receiver = receiverWith(keys, fetched);
    const first = delivery('deposit.created', { object: 'deposit', id: 'dep_K1', version: 1 });
    await receiver.handle(first.body, first.headers);
    expect(fetched.count).toBe(1);
    // A kid nobody published: one refetch, then none for 10 seconds however many arrive.
    for (let index = 0; index < 3; index += 1) {
      const unknown = delivery('deposit.created', { object: 'deposit', id: `dep_U${index}`, version: 1 }, { kid: 'whk_NOPE' });
      expect((await receiver.handle(unknown.body, unknown.headers)).body.error).toBe('unknown_kid');
    }
    expect(fetched.count).toBe(2);
    // The rotation publishes a new key; after the throttle a signature by it triggers the refetch.
    keys.push({ ...published, kid: 'whk_NEXT', public_key: rotated.publicKey.export({ format: 'der', type: 'spki' }).toString('base64') });
    now.ms += 10_000;
    const next = delivery('deposit.created', { object: 'deposit', id: 'dep_K2', version: 1 }, { kid: 'whk_NEXT', key: rotated.privateKey });
    expect((await receiver.handle(next.body, next.headers)).status).toBe(200);
    expect(fetched.count).toBe(3);
    now.ms += 24 * HOUR_MS;
    const later = delivery('deposit.created', { object: 'deposit', id: 'dep_K3', version: 1 });
    await receiver.handle(later.body, later.headers);
    expect(fetched.count).toBe(4);
  });

  it('keeps events it does not understand harmless', () => {
    const store = new MemoryReceiverStore();
    const event = { id: 'evt_1', object: 'event', type: 'webhook.key.rotating', livemode: false, data: { object: { object: 'webhook_key_rotation' } } } as ReceivedEvent;
    expect(store.process(event, 0)).toBe('applied');
    expect(store.process(event, 0)).toBe('duplicate');
  });
});
