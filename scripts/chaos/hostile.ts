import crypto from 'node:crypto';
import net from 'node:net';
import type { Database } from '../../src/platform/db.ts';
import { signedHeaders } from '../../src/http/canonical.ts';
import { newIdempotencyKey, type ChaosClient } from './client.ts';
import type { CheckRow } from './checks.ts';
import { multipart, type Tenants } from './load.ts';

/**
 * The hostile-body family of the chaos run (issue 28): while the load runs, bodies are cut and trickled
 * over raw sockets to the api processes, as an attacker (or a phone on a dying link) would send them.
 * Five kinds, one started every `EVERY_MS`, at most `MAX_IN_FLIGHT` at once:
 *
 * - `multipart_cut`: a slip upload whose Content-Length ends before the closing boundary;
 * - `multipart_stopped`: a slip upload whose client stops sending half-way and closes its side;
 * - `json_cut`: a signed deposit creation whose body (and signature) end in the middle of the JSON;
 * - `slow_body`: a signed deposit creation whose body is trickled a byte every two seconds;
 * - `refused_before_body`: a wrong key announcing 5.6 MB that it never sends.
 *
 * The checks: every answer is a 4xx, a 503 or none (a connection cut by a kill), never another 5xx; the
 * refusals that must come from the headers come at once; and no order used by the family has a slip.
 */

type HostileKind = 'multipart_cut' | 'multipart_stopped' | 'json_cut' | 'slow_body' | 'refused_before_body';
const KINDS: readonly HostileKind[] = ['multipart_cut', 'multipart_stopped', 'json_cut', 'slow_body', 'refused_before_body'];

const EVERY_MS = 1_500;
const MAX_IN_FLIGHT = 4;
/** A trickled body is given up on by the client after this (the service's pace rule ends it within about 20 s). */
const SLOW_BODY_GIVE_UP_MS = 45_000;
/**
 * A refusal from the headers comes without waiting for the body, which never comes here: one that took
 * this long waited for it (a body's deadline is 30 s). Generous, because the run saturates both cores.
 */
const HEADER_REFUSAL_LIMIT_MS = 10_000;
/** Uploads one order's capability takes in a minute (the slip bucket); a new order after this many. */
const UPLOADS_PER_ORDER = 15;

interface Answer {
  status: number | null;
  elapsed_ms: number;
}

/** Writes `head` and `body` on a new connection, optionally half-closing, and reads until the service closes it. */
function rawExchange(port: number, bytes: Buffer, options: { end: boolean; trickle?: Buffer; timeout_ms: number }): Promise<Answer> {
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let trickled = 0;
    const trickle = options.trickle
      ? setInterval(() => {
          if (trickled < (options.trickle as Buffer).length) socket.write((options.trickle as Buffer).subarray(trickled, (trickled += 1)));
        }, 2_000)
      : null;
    const timer = setTimeout(() => socket.destroy(), options.timeout_ms);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      if (trickle) clearInterval(trickle);
      const match = /^HTTP\/1\.1 (\d{3}) /.exec(Buffer.concat(chunks).toString('latin1'));
      resolve({ status: match ? Number(match[1]) : null, elapsed_ms: Date.now() - started });
    });
    socket.write(bytes, () => {
      if (options.end) socket.end();
    });
  });
}

function head(method: string, target: string, headers: Record<string, string>): Buffer {
  return Buffer.from([`${method} ${target} HTTP/1.1`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`), 'Connection: close', '', ''].join('\r\n'));
}

export class HostileBodies {
  readonly answers = new Map<HostileKind, Map<string, number>>();
  readonly deposit_ids: string[] = [];
  /** Refusals from the headers that took longer than HEADER_REFUSAL_LIMIT_MS (they must not wait for a body). */
  readonly slow_refusals: number[] = [];
  private order: { id: string; token: string; upload_url: string } | null = null;
  private orderUses = 0;
  private inFlight = 0;

  constructor(
    private readonly client: ChaosClient,
    private readonly tenants: Tenants,
    private readonly load_end_ms: number,
  ) {}

  async run(): Promise<void> {
    const running: Promise<void>[] = [];
    for (let round = 0; Date.now() < this.load_end_ms; round += 1) {
      if (this.inFlight < MAX_IN_FLIGHT) running.push(this.send(KINDS[round % KINDS.length] as HostileKind));
      await new Promise((resolve) => setTimeout(resolve, EVERY_MS));
    }
    await Promise.all(running);
  }

  private count(kind: HostileKind, answer: Answer): void {
    const byStatus = this.answers.get(kind) ?? new Map<string, number>();
    const key = answer.status === null ? 'none' : String(answer.status);
    byStatus.set(key, (byStatus.get(key) ?? 0) + 1);
    this.answers.set(kind, byStatus);
    if (kind === 'refused_before_body' && answer.status !== null && answer.elapsed_ms > HEADER_REFUSAL_LIMIT_MS) this.slow_refusals.push(answer.elapsed_ms);
  }

  private async send(kind: HostileKind): Promise<void> {
    this.inFlight += 1;
    try {
      const port = await this.client.readyPort();
      this.count(kind, await this.exchange(kind, port));
    } catch {
      // An order could not be created (its process was killed): the next round tries again.
    } finally {
      this.inFlight -= 1;
    }
  }

  private async exchange(kind: HostileKind, port: number): Promise<Answer> {
    const merchant = this.tenants.merchants[0]!;
    if (kind === 'refused_before_body') {
      const bytes = head('POST', '/v1/pay/deposits', { Host: `127.0.0.1:${port}`, Authorization: `Bearer sk_test_${'h'.repeat(32)}`, 'Content-Type': 'application/json', 'Content-Length': '5600000' });
      return rawExchange(port, bytes, { end: false, timeout_ms: 2 * HEADER_REFUSAL_LIMIT_MS });
    }
    if (kind === 'json_cut' || kind === 'slow_body') {
      const body = Buffer.from(this.creationBody());
      const sent = kind === 'json_cut' ? body.subarray(0, crypto.randomInt(1, body.length)) : body;
      const headers = signedHeaders({ ...merchant.credentials, method: 'POST', target: '/v1/pay/deposits', body: sent, idempotency_key: newIdempotencyKey('hostile') });
      const bytes = head('POST', '/v1/pay/deposits', { Host: `127.0.0.1:${port}`, 'Content-Type': 'application/json', 'Content-Length': String(sent.length), ...headers });
      if (kind === 'json_cut') return rawExchange(port, Buffer.concat([bytes, sent]), { end: false, timeout_ms: 10_000 });
      return rawExchange(port, Buffer.concat([bytes, sent.subarray(0, 100)]), { end: false, trickle: sent.subarray(100), timeout_ms: SLOW_BODY_GIVE_UP_MS });
    }
    const order = await this.nextOrder();
    const address = new URL(order.upload_url);
    const { body, content_type } = multipart([{ name: 'file', data: crypto.randomBytes(2_048), filename: 'slip.png', content_type: 'image/png' }]);
    const cut = body.subarray(0, crypto.randomInt(1, body.length - 8));
    const declared = kind === 'multipart_cut' ? cut.length : body.length;
    const bytes = head('POST', address.pathname, { Host: address.host, Authorization: `Bearer ${order.token}`, 'Idempotency-Key': newIdempotencyKey('hostile'), 'Content-Type': content_type, 'Content-Length': String(declared) });
    return rawExchange(port, Buffer.concat([bytes, cut]), { end: kind === 'multipart_stopped', timeout_ms: 10_000 });
  }

  private creationBody(): string {
    const reference = `hostile-${crypto.randomBytes(6).toString('hex')}`;
    return JSON.stringify({
      amount_minor: 25_000,
      currency: 'THB',
      merchant_reference: reference,
      end_user_ref: `user-${reference}`,
      sender: { bank_code: this.tenants.sender_banks[0], account_number: `8${crypto.randomInt(100_000_000, 999_999_999)}`, account_name_th: 'สมชาย ใจดี' },
      client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.66', user_agent: 'chaos-hostile' },
    });
  }

  /** An order of the family's own, made through the API, whose capability the cut uploads use. */
  private async nextOrder(): Promise<{ id: string; token: string; upload_url: string }> {
    if (this.order && this.orderUses < UPLOADS_PER_ORDER) {
      this.orderUses += 1;
      return this.order;
    }
    const outcome = await this.client.perform(
      'hostile.deposit.create',
      { kind: 'merchant', method: 'POST', target: '/v1/pay/deposits', body: this.creationBody(), idempotency_key: newIdempotencyKey('hostile-dep'), credentials: this.tenants.merchants[0]!.credentials },
      { deadline_ms: Date.now() + 60_000 },
    );
    const created = outcome.result === 'acked' ? (JSON.parse(outcome.body_text) as { id: string; slip_upload?: { token: string; upload_url: string } }) : null;
    if (!created?.slip_upload) throw new Error('no order with a capability for the hostile family');
    this.deposit_ids.push(created.id);
    this.order = { id: created.id, ...created.slip_upload };
    this.orderUses = 1;
    return this.order;
  }

  async rows(database: Database): Promise<CheckRow[]> {
    const observed = KINDS.map((kind) => `${kind} ${[...(this.answers.get(kind) ?? new Map<string, number>())].map(([status, n]) => `${n}×${status}`).join(' ') || '0'}`).join('; ');
    const faults = [...this.answers.values()].flatMap((byStatus) => [...byStatus].filter(([status]) => status !== 'none' && Number(status) >= 500 && status !== '503'));
    const { rows } = await database.query<{ receipts: number }>('SELECT count(*)::int AS receipts FROM slip_receipts WHERE deposit_id = ANY($1::text[])', [this.deposit_ids]);
    const stored = rows[0]?.receipts ?? 0;
    return [
      {
        check: 'hostile bodies (cut, stopped, trickled, refused from the headers): catalogue answers only, nothing stored',
        observed: `${observed}; ${faults.length === 0 ? 'no 5xx but 503' : `5xx: ${faults.map(([status, n]) => `${n}×${status}`).join(' ')}`}; ${stored} receipts on the family's ${this.deposit_ids.length} orders; ${this.slow_refusals.length} header refusals slower than ${HEADER_REFUSAL_LIMIT_MS / 1000} s`,
        result: faults.length === 0 && stored === 0 && this.slow_refusals.length === 0 ? 'pass' : 'FAIL',
      },
    ];
  }
}
