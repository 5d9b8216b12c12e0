import crypto from 'node:crypto';
import { createServiceInstance, type ServiceInstance } from '../src/app.ts';
import type { Clock } from '../src/platform/clock.ts';
import { loadConfig } from '../src/platform/config.ts';
import { openDatabase, type Database } from '../src/platform/db.ts';
import { createLogger } from '../src/platform/logger.ts';
import { migrate } from '../src/platform/migrate.ts';
import { SYSTEM_CAUSE } from '../src/platform/cause.ts';
import type { SlipUpload } from '../src/slip-capability/capability.ts';
import type { WalletAccount } from '../src/ledger/types.ts';
import { DEFAULT_WEBHOOK_SETTINGS } from '../src/webhooks/settings.ts';
import { createFreshDatabase, withDatabaseName } from './support.ts';
import { fundWithdrawer } from './setup.ts';

/**
 * The service side of bench/growth.ts: a service instance on a fresh database, the merchants every run
 * measures (the big merchant, withdrawers whose open withdrawals give deposits liquidity, an endpoint),
 * and the service operations that make the template rows the SQL generator copies.
 */

export const BENCH_ACTOR = { actor_type: 'system' as const, actor_id: 'bench', request_id: null };
export const DEPOSIT_MINOR = 100_000;
const WITHDRAWAL_MINOR = 1_000_000;
/** Orders of the big merchant in review on every database, so that the queue's first page is full on the empty one too. */
export const FIXTURE_REVIEWS = 25;
const SENDER_BANK = '004';
const SENDER_NAME = 'สมหญิง รักไทย';
const UPLOAD_BASE_URL = 'http://slips.bench.test';

/**
 * Real time plus an offset the bench moves forward: the retention week and the expiry of the template
 * order pass in seconds, while the claims and leases of the service stay consistent with each other.
 */
export class OffsetClock implements Clock {
  offset_ms = 0;
  now(): Date {
    return new Date(Date.now() + this.offset_ms);
  }
}

export interface BenchService {
  name: string;
  url: string;
  database: Database;
  instance: ServiceInstance;
  clock: OffsetClock;
}

export async function startService(
  serverUrl: string,
  name: string,
  pool: number,
  tls_ca_pem: string,
  options: { reuse?: boolean; master_key?: Buffer } = {},
): Promise<BenchService> {
  const reuse = options.reuse ?? false;
  // A reused database (bench:console --reuse) keeps what an earlier run with --keep generated.
  const url = reuse ? withDatabaseName(serverUrl, name) : await createFreshDatabase(serverUrl, name);
  const database = await openDatabase({ database_url: url, data_dir: null, pool_size: pool });
  await migrate(database);
  const clock = new OffsetClock();
  const instance = createServiceInstance({
    config: loadConfig({ DATABASE_URL: url, LOG_LEVEL: 'silent', WORKER_ENABLED: 'false', API_ENABLED: 'false', DB_POOL_SIZE: String(pool), UPLOAD_BASE_URL }),
    database,
    clock,
    logger: createLogger(process.env.BENCH_LOG_LEVEL ?? 'error', process.stderr),
    master_key: options.master_key ?? crypto.randomBytes(32),
    owns_database: false,
    webhooks: { settings: { ...DEFAULT_WEBHOOK_SETTINGS, sandbox_loopback: true, extra_ca_pem: [tls_ca_pem] }, environment: {} },
  });
  return { name, url, database, instance, clock };
}

export interface Fixture {
  white_label_id: string;
  big: WalletAccount;
  endpoint_id: string;
  withdrawers: { account: WalletAccount; beneficiary_id: string }[];
}

let referenceCounter = 0;
const RUN_TAG = crypto.randomBytes(3).toString('hex');
/**
 * Each run's payers' accounts are a block of their own: a database kept by an earlier run (--reuse) still holds that
 * run's unpaid orders, and a second open order of the same amount from the same sender is refused.
 */
const SENDER_ACCOUNT_BASE = 3_000_000_000 + crypto.randomInt(0, 990) * 1_000_000;

export function nextReference(): number {
  referenceCounter += 1;
  return referenceCounter;
}

/** The merchants every database of the run has, made through the services in the same order. */
export async function prepareFixture(service: BenchService, receiver_url: string, open_withdrawals: number): Promise<Fixture> {
  const { tenancy, webhooks } = service.instance.services;
  const sandbox = await tenancy.bootstrapSandbox();
  if (!sandbox) throw new Error('the bench database already had a brand');
  const white_label_id = sandbox.white_label_id;
  const bigMerchant = await tenancy.createMerchant(BENCH_ACTOR, { white_label_id, name: 'Big merchant' });
  const big: WalletAccount = { white_label_id, merchant_id: bigMerchant.id, livemode: false };
  const endpoint = await webhooks.service.createEndpoint(BENCH_ACTOR, null, { ...big, url: receiver_url });
  const withdrawers: Fixture['withdrawers'] = [];
  for (let index = 0; index < 10; index += 1) {
    const merchant = await tenancy.createMerchant(BENCH_ACTOR, { white_label_id, name: `Withdrawer ${index + 1}` });
    const account: WalletAccount = { white_label_id, merchant_id: merchant.id, livemode: false };
    withdrawers.push({ account, beneficiary_id: await fundWithdrawer(service.instance, service.database, account, 1e12) });
  }
  await openWithdrawals(service, withdrawers, open_withdrawals);
  // A review desk is never empty: a page of the queue's orders on every database, paid by another payer.
  for (let index = 0; index < FIXTURE_REVIEWS; index += 1) await uploadSlipAndSettle(service, await payAtSandboxBank(service, await createDeposit(service, big), true));
  return { white_label_id, big, endpoint_id: endpoint.id, withdrawers };
}

/** Opens `count` withdrawals through the service (order, reservation, event, expiry job), 100 per transaction, 4 lanes. */
export async function openWithdrawals(service: BenchService, withdrawers: Fixture['withdrawers'], count: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async (_, lane) => {
      // Each lane has merchants of its own, so that two lanes never lock one wallet in turn (a deadlock).
      const mine = withdrawers.filter((_merchant, index) => index % 4 === lane);
      let turn = 0;
      while (next < count) {
        const size = Math.min(100, count - next);
        next += size;
        await service.database.transaction(async (tx) => {
          for (let index = 0; index < size; index += 1) {
            const merchant = mine[turn++ % mine.length]!;
            const number = nextReference();
            const created = await service.instance.services.withdrawals.create(
              tx,
              merchant.account,
              { amount_minor: WITHDRAWAL_MINOR, merchant_reference: `w-${RUN_TAG}-${number}`, end_user_ref: `payee-${number}`, beneficiary_id: merchant.beneficiary_id },
              SYSTEM_CAUSE,
            );
            if (!created.ok) throw created.error;
          }
        });
      }
    }),
  );
}

export interface CreatedDeposit {
  account: WalletAccount;
  deposit_id: string;
  upload: SlipUpload;
}

/** One deposit through the service, matched at once, with its own end user, device and sender account. */
export async function createDeposit(service: BenchService, account: WalletAccount, amount_minor = DEPOSIT_MINOR): Promise<CreatedDeposit> {
  const number = nextReference();
  const created = await service.database.transaction((tx) =>
    service.instance.services.deposits.create(
      tx,
      account,
      {
        amount_minor,
        merchant_reference: `d-${RUN_TAG}-${number}`,
        end_user_ref: `payer-${RUN_TAG}-${number}`,
        sender: { bank_code: SENDER_BANK, account_number: String(SENDER_ACCOUNT_BASE + number), account_name_th: SENDER_NAME },
        client: { device_fingerprint: `fp-${RUN_TAG}-${number}`, ip: '198.51.100.7', user_agent: 'bench-growth/1.0' },
      },
      SYSTEM_CAUSE,
    ),
  );
  if (!created.matched || !created.slip_upload) throw new Error(`a deposit was not matched at once (${created.deposit.status})`);
  return { account, deposit_id: created.deposit.id, upload: created.slip_upload };
}

export interface PaidDeposit extends CreatedDeposit {
  /** The sandbox slip as the bank app shows it (PNG), and the QR text a checkout page reads and sends along. */
  image: Buffer;
  image_sha256: string;
  media_type: 'image/png' | 'image/jpeg';
  payload: string;
}

/** The payer's transfer at the sandbox bank (renders the slip image: set-up work, never measured). */
export async function payAtSandboxBank(service: BenchService, order: CreatedDeposit, other_payer = false): Promise<PaidDeposit> {
  // Another payer's name than the declared one sends the order to review (SENDER_NAME_MISMATCH).
  const sender = other_payer ? { sender: { bank_code: SENDER_BANK, account_number: '4000000001', account_name_th: 'มานี มีนา' } } : {};
  const made = await service.database.transaction((tx) => service.instance.services.sandboxBank.transfer(tx, order.account, { deposit_id: order.deposit_id, ...sender }));
  if (!made || !made.ok) throw new Error(`the sandbox bank made no transfer for ${order.deposit_id}: ${made ? made.error.code : 'not found'}`);
  const image = Buffer.from(made.value.slip.image_base64, 'base64');
  const media_type = made.value.slip.media_type === 'image/jpeg' ? 'image/jpeg' : 'image/png';
  return { ...order, image, image_sha256: crypto.createHash('sha256').update(image).digest('hex'), media_type, payload: made.value.slip.payload };
}

/**
 * The slip of a paid order, as the upload route hands it to the slip service (the capability verified,
 * the sandbox slip's image with the QR text the checkout page read from it), then the worker's due jobs: the verification against the sandbox bank and the settlement.
 */
export async function uploadSlipAndSettle(service: BenchService, order: PaidDeposit): Promise<void> {
  const { slipTokens, slips } = service.instance.services;
  const verified = slipTokens.verify(order.upload.token, { url: order.upload.upload_url, deposit_id: order.deposit_id, now: service.clock.now() });
  if (!verified.ok) throw new Error(`the slip capability was refused: ${verified.reason}`);
  const path = new URL(order.upload.upload_url).pathname;
  await slips.upload({
    claims: verified.claims,
    idempotency_key: crypto.randomUUID(),
    request_id: `req_${crypto.randomBytes(8).toString('hex')}`,
    path,
    evidence: { shape: 'multipart', image: order.image, image_sha256: order.image_sha256, media_type: order.media_type, payload: order.payload },
  });
  await service.instance.worker.runDueJobs();
}

export async function statusOf(database: Database, white_label_id: string, deposit_id: string): Promise<string> {
  const { rows } = await database.query<{ status: string }>('SELECT status FROM deposit_orders WHERE white_label_id = $1 AND deposit_id = $2', [white_label_id, deposit_id]);
  return rows[0]?.status ?? 'missing';
}

export interface Templates {
  merchant: WalletAccount;
  settled: string;
  review: string;
  expired: string;
}

/**
 * Template orders on a merchant of their own, made by the services: one settled through its slip, one
 * in review (the 101.00 THB scenario), one expired (the clock moved past its deadline and the expiry job
 * run). The generator copies their rows, so every copied row is one the service itself wrote.
 */
export async function makeTemplates(service: BenchService, white_label_id: string): Promise<Templates> {
  const merchant = await service.instance.services.tenancy.createMerchant(BENCH_ACTOR, { white_label_id, name: 'Template merchant' });
  const account: WalletAccount = { white_label_id, merchant_id: merchant.id, livemode: false };
  const settled = await payAtSandboxBank(service, await createDeposit(service, account));
  await uploadSlipAndSettle(service, settled);
  const review = await payAtSandboxBank(service, await createDeposit(service, account), true);
  await uploadSlipAndSettle(service, review);
  const expired = await createDeposit(service, account);
  const statuses = [await statusOf(service.database, white_label_id, settled.deposit_id), await statusOf(service.database, white_label_id, review.deposit_id)];
  if (statuses[0] !== 'settled' || statuses[1] !== 'under_review') {
    const { rows } = await service.database.query<{ review: unknown }>('SELECT review FROM deposit_orders WHERE white_label_id = $1 AND deposit_id = $2', [white_label_id, settled.deposit_id]);
    throw new Error(`template orders are ${statuses.join(', ')}, not settled, under_review: ${JSON.stringify(rows[0]?.review)}`);
  }
  // Past the deadline and the late-slip window: the expiry job runs as it would an hour later.
  service.clock.offset_ms += 2 * 60 * 60 * 1000;
  await service.instance.worker.runDueJobs();
  service.clock.offset_ms = 0;
  const expiredStatus = await statusOf(service.database, white_label_id, expired.deposit_id);
  if (expiredStatus !== 'expired') throw new Error(`the expired template is ${expiredStatus}`);
  return { merchant: account, settled: settled.deposit_id, review: review.deposit_id, expired: expired.deposit_id };
}
