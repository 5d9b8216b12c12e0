import { performance } from 'node:perf_hooks';
import { SYSTEM_CAUSE } from '../src/platform/cause.ts';
import { percentile } from './support.ts';
import { startMeter, stopMeter } from './meters.ts';
import {
  createDeposit,
  payAtSandboxBank,
  uploadSlipAndSettle,
  type BenchService,
  type CreatedDeposit,
  type Fixture,
  type PaidDeposit,
} from './growth-fixture.ts';
import { BENCH_STATEMENT, captureAs } from './growth-explain.ts';

/** The measured operations of bench/growth.ts, each on one side (the empty or the grown database). */

export interface GrowthSettings {
  scale: number;
  keep: boolean;
  /** Measure again on the grown database a --keep run left (no generation, no retention week). */
  reuse: boolean;
  /** With --reuse: a retention week after the measurements, too. */
  week: boolean;
  server_url: string;
  pool: number;
  deposits: number;
  settles: number;
  reads: number;
  webhooks: number;
  warmup: number;
  /** Blocks per operation and side, alternating which database goes first (ABBA), so that drift on a shared machine hits both. */
  rounds: number;
}

function argument(name: string): string | null {
  const index = process.argv.indexOf(name);
  if (index === -1) return null;
  return process.argv[index + 1] ?? null;
}

export function readGrowthSettings(): GrowthSettings {
  const scale = Number(argument('--scale') ?? process.env.BENCH_GROWTH_SCALE ?? '1');
  if (!Number.isFinite(scale) || scale <= 0 || scale > 4) throw new Error('--scale must be a number in (0, 4]');
  const number = (name: string, fallback: number) => {
    const value = Number(process.env[name] ?? fallback);
    if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer`);
    return value;
  };
  return {
    scale,
    keep: process.argv.includes('--keep'),
    reuse: process.argv.includes('--reuse'),
    week: process.argv.includes('--week'),
    server_url: process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    pool: number('BENCH_DB_POOL', 10),
    deposits: number('BENCH_GROWTH_DEPOSITS', 2000),
    settles: number('BENCH_GROWTH_SETTLES', 600),
    reads: number('BENCH_GROWTH_READS', 1000),
    webhooks: number('BENCH_GROWTH_WEBHOOKS', 4000),
    warmup: number('BENCH_GROWTH_WARMUP', 50),
    rounds: number('BENCH_GROWTH_ROUNDS', 4),
  };
}

export interface Measured {
  operation: string;
  database: string;
  ops: number;
  service_cpu_us: number;
  postgres_cpu_us: number;
  p50_ms: number;
  p99_ms: number;
}

/** One block of an operation on one side: CPU totals (this process, the database's PostgreSQL backends) and each latency. */
interface Sample {
  operation: string;
  database: string;
  ops: number;
  service_us: number;
  postgres_us: number;
  latencies: number[];
}

export interface Side {
  service: BenchService;
  fixture: Fixture;
  grown: boolean;
  made: CreatedDeposit[];
  paid: PaidDeposit[];
  settled: number;
}

/** Runs `run(i)` `count` times one after another under the meters (the capture of statements on the grown side). */
async function measureBlock(side: Side, operation: string, count: number, run: (index: number) => Promise<void>): Promise<Sample> {
  const target = { database_url: side.service.url, database_name: side.service.name };
  const latencies: number[] = [];
  if (side.grown) captureAs(operation);
  const meter = await startMeter(target);
  try {
    for (let index = 0; index < count; index += 1) {
      const started = performance.now();
      await run(index);
      latencies.push(performance.now() - started);
    }
  } catch (error) {
    // The sampler's session and timer would keep the process alive after the error is reported.
    await meter.sampler.stop();
    throw error;
  } finally {
    captureAs(null);
  }
  const cost = await stopMeter(target, meter, count, null, null);
  return { operation, database: side.service.name, ops: count, service_us: cost.app_cpu_us * count, postgres_us: cost.postgres_cpu_us * count, latencies };
}

export function summarize(samples: Sample[]): Measured[] {
  const groups = new Map<string, Sample[]>();
  for (const sample of samples) {
    const key = `${sample.operation}\u0000${sample.database}`;
    groups.set(key, [...(groups.get(key) ?? []), sample]);
  }
  return [...groups.values()].map((group) => {
    const ops = group.reduce((sum, sample) => sum + sample.ops, 0);
    const latencies = Float64Array.from(group.flatMap((sample) => sample.latencies)).sort();
    return {
      operation: group[0]!.operation,
      database: group[0]!.database,
      ops,
      service_cpu_us: group.reduce((sum, sample) => sum + sample.service_us, 0) / ops,
      postgres_cpu_us: group.reduce((sum, sample) => sum + sample.postgres_us, 0) / ops,
      p50_ms: percentile(latencies, 0.5),
      p99_ms: percentile(latencies, 0.99),
    };
  });
}

async function lastSequence(side: Side): Promise<number> {
  const { rows } = await side.service.database.query<{ last_sequence: string }>(
    'SELECT last_sequence FROM event_sequences WHERE white_label_id = $1 AND merchant_id = $2 AND livemode = false',
    [side.fixture.big.white_label_id, side.fixture.big.merchant_id],
  );
  return Number(rows[0]?.last_sequence ?? 0);
}

function feedPage(side: Side, after_sequence: number) {
  const { big } = side.fixture;
  return side.service.instance.services.events.listEvents(side.service.database, {
    white_label_id: big.white_label_id,
    merchant_id: big.merchant_id,
    livemode: false,
    after_sequence,
    before_sequence: null,
    type: null,
    object_status: null,
    created_from: null,
    created_to: null,
    descending: false,
    limit: 101,
  });
}

function reviewPage(side: Side) {
  return side.service.instance.services.review.queue(side.service.database, side.fixture.white_label_id, { livemode: null, reason_code: null, escalated: null, after: null, limit: 21 });
}

/** An operation measured in blocks: `run` does one; `warm` (optional) readies a side before its first block. */
export interface Operation {
  name: string;
  count: number;
  warm?(side: Side): Promise<void>;
  run(side: Side, index: number): Promise<void>;
}

function depositCreate(settings: GrowthSettings): Operation {
  return {
    name: 'deposit_create',
    count: settings.deposits,
    async run(side) {
      side.made.push(await createDeposit(side.service, side.fixture.big));
    },
  };
}

/** The slips of orders the deposit phase made; their transfers at the sandbox bank are made first, unmeasured. */
function slipSettle(settings: GrowthSettings): Operation {
  return {
    name: 'slip_settle',
    count: settings.settles,
    async warm(side) {
      for (const order of side.made.slice(0, settings.settles + settings.warmup)) side.paid.push(await payAtSandboxBank(side.service, order));
      if (side.paid.length < settings.settles + settings.warmup) throw new Error('slip_settle needs more orders than deposit_create made');
    },
    async run(side) {
      const order = side.paid[side.settled]!;
      side.settled += 1;
      await uploadSlipAndSettle(side.service, order);
    },
  };
}

function feed(settings: GrowthSettings, name: string, position: (head: number) => number): Operation {
  const after = new Map<Side, number>();
  return {
    name,
    count: settings.reads,
    async warm(side) {
      after.set(side, position(await lastSequence(side)));
    },
    async run(side) {
      const page = await feedPage(side, after.get(side) ?? 0);
      if (page.events.length === 0) throw new Error(`${name}: an empty page`);
    },
  };
}

function reviewQueue(settings: GrowthSettings): Operation {
  return {
    name: 'review_queue',
    count: settings.reads,
    async run(side) {
      const page = await reviewPage(side);
      if (page.length === 0) throw new Error('review_queue: an empty page');
    },
  };
}

export function operations(settings: GrowthSettings): Operation[] {
  return [
    depositCreate(settings),
    slipSettle(settings),
    feed(settings, 'feed_first', () => 0),
    feed(settings, 'feed_middle', (head) => Math.floor(head / 2)),
    feed(settings, 'feed_last', (head) => Math.max(0, head - 100)),
    reviewQueue(settings),
  ];
}

/** An operation on both sides: warm-up on each, then `rounds` blocks per side, the first side alternating. */
export async function measureOperation(settings: GrowthSettings, sides: Side[], operation: Operation): Promise<Sample[]> {
  for (const side of sides) {
    await operation.warm?.(side);
    for (let index = 0; index < settings.warmup; index += 1) await operation.run(side, index);
  }
  const samples: Sample[] = [];
  const perBlock = Math.max(1, Math.floor(operation.count / settings.rounds));
  for (let round = 0; round < settings.rounds; round += 1) {
    const order = round % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) samples.push(await measureBlock(side, operation.name, perBlock, (index) => operation.run(side, index)));
  }
  return samples;
}

/** Writes `count` events of the big merchant (not measured), then measures the dispatcher delivering them all. */
async function webhookBlock(side: Side, count: number): Promise<Sample> {
  const { events, webhooks } = side.service.instance.services;
  const database = side.service.database;
  const eventIds = await database.transaction(async (tx) => {
    const ids: string[] = [];
    for (let index = 0; index < count; index += 1) {
      const envelope = await events.emitEvent(tx, {
        ...side.fixture.big,
        type: 'deposit.settled',
        object: { object: 'deposit', id: `dep_WEBHOOK${index}`, version: 2, status: 'settled', amount_minor: 100_000 },
        previous_attributes: { version: 1, status: 'slip_processing' },
        cause: SYSTEM_CAUSE,
      });
      ids.push(envelope.id);
    }
    return ids;
  });
  const target = { database_url: side.service.url, database_name: side.service.name };
  if (side.grown) captureAs('webhook_dispatch');
  const meter = await startMeter(target);
  webhooks.dispatcher.start();
  const deadline = performance.now() + 300_000;
  try {
    while ((await delivered(side, eventIds)) < count) {
      if (performance.now() > deadline) throw new Error(`${side.service.name}: webhooks not delivered after 5 minutes`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } catch (error) {
    await meter.sampler.stop();
    await webhooks.dispatcher.stop();
    throw error;
  } finally {
    captureAs(null);
  }
  const cost = await stopMeter(target, meter, count, null, null);
  await webhooks.dispatcher.stop();
  // Latency of a delivery: its attempt (signing, HTTPS, the recorded answer), as bench/webhooks.ts reports it.
  const attempts = await database.query<{ duration_ms: number }>(
    `${BENCH_STATEMENT} SELECT a.duration_ms FROM webhook_delivery_attempts a JOIN webhook_deliveries d ON d.white_label_id = a.white_label_id AND d.delivery_id = a.delivery_id
      WHERE d.white_label_id = $1 AND d.endpoint_id = $2 AND d.event_id = ANY($3)`,
    [side.fixture.white_label_id, side.fixture.endpoint_id, eventIds],
  );
  return { operation: 'webhook_dispatch', database: side.service.name, ops: count, service_us: cost.app_cpu_us * count, postgres_us: cost.postgres_cpu_us * count, latencies: attempts.rows.map((row) => Number(row.duration_ms)) };
}

/** This block's deliveries that succeeded, by their events (generated deliveries can be dated later than now). */
async function delivered(side: Side, eventIds: string[]): Promise<number> {
  const { rows } = await side.service.database.query<{ done: number }>(
    `${BENCH_STATEMENT} SELECT count(*)::int AS done FROM webhook_deliveries WHERE white_label_id = $1 AND endpoint_id = $2 AND event_id = ANY($3) AND status = 'succeeded'`,
    [side.fixture.white_label_id, side.fixture.endpoint_id, eventIds],
  );
  return rows[0]?.done ?? 0;
}

export async function measureWebhooks(settings: GrowthSettings, sides: Side[]): Promise<Sample[]> {
  for (const side of sides) await webhookBlock(side, Math.max(1, settings.warmup));
  const samples: Sample[] = [];
  const perBlock = Math.max(1, Math.floor(settings.webhooks / settings.rounds));
  for (let round = 0; round < settings.rounds; round += 1) {
    const order = round % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) samples.push(await webhookBlock(side, perBlock));
  }
  return samples;
}
