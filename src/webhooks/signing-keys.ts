import type crypto from 'node:crypto';
import { outsideTestClock, type Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { SecretBox } from '../platform/crypto.ts';
import { invariant } from '../platform/assert.ts';
import { formatNullableTimestamp, formatTimestamp, HOUR_MS, MINUTE_MS, SECOND_MS } from '../platform/time.ts';
import { CURRENT_API_VERSION } from '../platform/cause.ts';
import type { EventsService } from '../events/service.ts';
import type { EventCause } from '../platform/cause.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { Actor } from '../platform/access.ts';
import * as repository from './signing-key-repository.ts';
import type { KeyAnnouncementRow, SigningKeySetKey } from './signing-key-repository.ts';
import { generateSigningKeyPair, privateKeyFromPkcs8 } from './signing.ts';
import { KEY_ROTATING_EVENT, newWebhookId, type SigningKeyRow } from './types.ts';

/**
 * The service's Ed25519 signing keys. Private keys exist only here, sealed under the master key; the
 * public halves are published at GET /v1/webhooks/signing-keys.
 *
 * Keys come in sets, one per environment, so that sandbox and live never cross, keys included: live
 * events are signed by the live set (the platform's, one for every brand), sandbox events by their
 * brand's sandbox set. A key belongs to exactly one set, and its kid is a fresh ULID, so no kid is in
 * two sets. The public list carries every set, because a receiver looks a key up by the kid of the
 * signature in front of it and the spec's record has no environment field; a sandbox key can still
 * never vouch for a live event, since only this service holds it and it signs only sandbox deliveries
 * (and a receiver checks `livemode` against its environment, as the spec requires).
 *
 * Rotation publishes the new key at once with `not_before` 30 seconds ahead, announces it with
 * `webhook.key.rotating`, and gives every older key of the set a `not_after`: it stays listed and
 * trusted until then. Which key signs is a function of the clock (the newest key of the set whose
 * `not_before` has come), so every process switches at the same instant without a job; a process
 * reloads a set at least every 10 seconds, which is shorter than the 30-second lead, so the switch is
 * never late. The live set is rotated by the platform administrator (back office or CLI); a brand's
 * sandbox set by the 114.00 THB sandbox scenario (`rotateForSandboxScenario`).
 */
export const KEY_SWITCH_DELAY_MS = 30 * SECOND_MS;
/** How long a replaced live key stays listed after the switch, unless the rotation says otherwise. */
export const DEFAULT_KEY_OVERLAP_MS = 24 * HOUR_MS;
export const MAX_KEY_OVERLAP_MS = 30 * 24 * HOUR_MS;
/**
 * How long a replaced sandbox key stays listed after the switch. After the switch no process signs with
 * it, and a receiver refuses any signature whose `t` is more than 300 seconds old, so after 5 minutes
 * nothing it signed can still be accepted; twice that leaves a margin for clocks and slow receivers.
 * Kept short because any sandbox merchant can rotate its brand's sandbox set (at most one rotation per
 * 30 seconds, since a rotation waiting for its switch answers the next request), and every listed key
 * is in the public list that every receiver fetches: a set lists at most about 22 keys this way.
 */
export const SANDBOX_KEY_OVERLAP_MS = 10 * MINUTE_MS;
/** The signer re-reads a key set this often (clock time). */
export const SIGNER_CACHE_MS = 10 * SECOND_MS;
/** Key sets whose keys a process keeps in memory (one per brand with sandbox deliveries, plus live). */
const CACHED_KEY_SETS_MAX = 1_000;
/** Opened private keys a process keeps; a sandbox set can rotate every 30 seconds, so this is bounded. */
const OPENED_PRIVATE_KEYS_MAX = 2_000;
export const PRIVATE_KEY_PURPOSE = 'webhook_signing_key.private_key';
const SCENARIO_RUN_ID_MAX_LENGTH = 255;

/** The live key set: the platform's, shared by every brand, exactly the keys published before sets existed. */
export const LIVE_KEY_SET: Readonly<SigningKeySetKey> = Object.freeze({ white_label_id: repository.PLATFORM_KEY_SCOPE, livemode: true });

/** Whose delivery is signed: its brand and environment decide the key set. */
export interface SigningAccount {
  white_label_id: string;
  livemode: boolean;
}

/** The key set that signs an account's events: live events the live set, sandbox events their brand's sandbox set. */
export function keySetOf(account: SigningAccount): SigningKeySetKey {
  if (account.livemode) return LIVE_KEY_SET;
  invariant(account.white_label_id !== repository.PLATFORM_KEY_SCOPE, 'a sandbox key set belongs to a brand');
  return { white_label_id: account.white_label_id, livemode: false };
}

function setName(set: SigningKeySetKey): string {
  return `${set.livemode ? 'live' : 'test'}:${set.white_label_id}`;
}

export type SigningKeyStatus = 'active' | 'next' | 'retiring';

/** The spec's signing key record. */
export interface SigningKeyRecord {
  kid: string;
  alg: 'Ed25519';
  public_key: string;
  format: 'spki_der_base64';
  raw_public_key: string;
  status: SigningKeyStatus;
  not_before: string;
  not_after: string | null;
}

export interface Signer {
  kid: string;
  private_key: crypto.KeyObject;
}

export interface RotationResult {
  object: 'webhook_key_rotation';
  /** The key set's environment: false for a brand's sandbox set, true for the platform's live set. */
  livemode: boolean;
  /** False when a rotation was already waiting for its switch (or this scenario run was answered before): that one is answered. */
  rotated: boolean;
  new_key: SigningKeyRecord;
  previous_kid: string | null;
  signing_switches_at: string;
  previous_key_not_after: string | null;
  /** Feeds (merchant and environment) that this call sent webhook.key.rotating. */
  announced_to: number;
}

/** What the sandbox scenario engine passes to `rotateForSandboxScenario`. */
export interface SandboxKeyRotationRequest {
  /** The brand of the merchant running the scenario: its sandbox key set is rotated. */
  white_label_id: string;
  /** The merchant running the scenario: its sandbox feed is always told. */
  merchant_id: string;
  /** The API request behind the run (the 114.00 THB deposit's creation), shown as `request.id` of the announcement; null when there is none. */
  request_id: string | null;
  /**
   * Names the run. A second call with the same run answers what the first got instead of rotating again,
   * because a scenario step is a durable job and runs at least once. It must be stable across retries of
   * the step (the 114.00 THB deposit's id fits). Defaults to `request_id`.
   */
  scenario_run_id?: string;
}

/** Keys still trusted at `now`, each with its status, newest first; the newest key already valid is the one that signs. Rows are of one set. */
export function keyStatuses(rows: readonly SigningKeyRow[], now: Date): { row: SigningKeyRow; status: SigningKeyStatus }[] {
  const trusted = rows.filter((row) => row.not_after === null || row.not_after.getTime() > now.getTime());
  const valid = trusted.filter((row) => row.not_before.getTime() <= now.getTime());
  const active = valid.reduce<SigningKeyRow | null>((best, row) => (best === null || row.generation > best.generation ? row : best), null);
  return trusted
    .map((row) => ({
      row,
      status: (row === active ? 'active' : row.not_before.getTime() > now.getTime() ? 'next' : 'retiring') as SigningKeyStatus,
    }))
    .sort((left, right) => right.row.generation - left.row.generation);
}

export function keyRecord(row: SigningKeyRow, status: SigningKeyStatus): SigningKeyRecord {
  return {
    kid: row.kid,
    alg: 'Ed25519',
    public_key: row.public_key_spki,
    format: 'spki_der_base64',
    raw_public_key: row.raw_public_key,
    status,
    not_before: formatTimestamp(row.not_before),
    not_after: formatNullableTimestamp(row.not_after),
  };
}

export interface SigningKeyDependencies {
  database: Database;
  clock: Clock;
  secretBox: SecretBox;
  events: EventsService;
  tenancy: TenancyService;
}

/** One rotation of a set as decided under the set's lock: a new key, or the one already waiting. */
interface SetRotation {
  set: SigningKeySetKey;
  rotated: boolean;
  key: SigningKeyRow;
  key_status: SigningKeyStatus;
  previous_kid: string | null;
  previous_key_not_after: Date | null;
}

function rotationResult(rotation: SetRotation, announced_to: number): RotationResult {
  return {
    object: 'webhook_key_rotation',
    livemode: rotation.set.livemode,
    rotated: rotation.rotated,
    new_key: keyRecord(rotation.key, rotation.key_status),
    previous_kid: rotation.previous_kid,
    signing_switches_at: formatTimestamp(rotation.key.not_before),
    previous_key_not_after: formatNullableTimestamp(rotation.previous_key_not_after),
    announced_to,
  };
}

export class SigningKeyService {
  /** Per key set, its trusted keys as last read, and when (clock time). */
  private readonly caches = new Map<string, { rows: SigningKeyRow[]; loaded_at_ms: number }>();
  private readonly privateKeys = new Map<string, crypto.KeyObject>();

  constructor(private readonly dependencies: SigningKeyDependencies) {}

  /**
   * Key time is the service's own time, never a sandbox test clock's, even when a scenario step runs
   * under a merchant's test clock: a key set serves a whole brand (the live set every brand), and
   * receivers judge a signature's `t` and a key's switch by their real clocks.
   */
  private now(): Date {
    return outsideTestClock(() => this.dependencies.clock.now());
  }

  /**
   * Every key still trusted, of every set, as the public endpoint lists them: the live set first, then
   * each brand's sandbox set; newest first within a set, each status computed within its own set. The
   * live set's first key is created here when there is none (as before sets existed); a sandbox set is
   * only ever created by a sandbox delivery or the sandbox scenario.
   */
  async listPublished(): Promise<SigningKeyRecord[]> {
    const { database } = this.dependencies;
    let rows = await repository.listTrustedSigningKeys(database, this.now());
    if (!rows.some((row) => row.livemode)) {
      await this.ensureKeys(database, LIVE_KEY_SET);
      rows = await repository.listTrustedSigningKeys(database, this.now());
    }
    const now = this.now();
    const sets = new Map<string, SigningKeyRow[]>();
    // The rows arrive grouped by set (live first, then brands in order), and a Map keeps that order.
    for (const row of rows) {
      const name = setName(row);
      const members = sets.get(name);
      if (members) members.push(row);
      else sets.set(name, [row]);
    }
    return [...sets.values()].flatMap((members) => keyStatuses(members, now).map(({ row, status }) => keyRecord(row, status)));
  }

  /** The key that signs an account's delivery now: the live set's for a live one, its brand's sandbox set's for a sandbox one. */
  async signer(account: SigningAccount): Promise<Signer> {
    const { database } = this.dependencies;
    const set = keySetOf(account);
    const name = setName(set);
    const checkedAt = this.now().getTime();
    let cached = this.caches.get(name);
    if (cached === undefined || checkedAt - cached.loaded_at_ms >= SIGNER_CACHE_MS || checkedAt < cached.loaded_at_ms) {
      cached = { rows: await this.ensureKeys(database, set), loaded_at_ms: checkedAt };
      this.remember(name, cached);
    }
    // The instant is read after the keys: a first key created just now has a not_before later than
    // any instant read before it was made.
    let active = keyStatuses(cached.rows, this.now()).find((entry) => entry.status === 'active');
    if (!active) {
      // A cached list can be older than the only valid key (another process made it): read once more.
      cached = { rows: await this.ensureKeys(database, set), loaded_at_ms: this.now().getTime() };
      this.remember(name, cached);
      active = keyStatuses(cached.rows, this.now()).find((entry) => entry.status === 'active');
    }
    if (!active) throw new Error(`no webhook signing key of the ${set.livemode ? 'live' : 'sandbox'} set is valid now`);
    return { kid: active.row.kid, private_key: this.privateKeyOf(active.row) };
  }

  /** Drops the cached key sets, so the next signature reads its set again. */
  forget(): void {
    this.caches.clear();
  }

  /**
   * Rotates the live key set: the new key is published now and signs live events from 30 seconds on;
   * older live keys stay trusted until the switch plus `overlap_ms`. Every live feed with an endpoint
   * is sent webhook.key.rotating in the same transaction; sandbox keys and sandbox feeds are not
   * touched. A rotation asked for while another is still waiting for its switch answers that one and
   * changes nothing.
   */
  async rotate(actor: Actor, options: { overlap_ms?: number } = {}): Promise<RotationResult> {
    const overlap_ms = options.overlap_ms ?? DEFAULT_KEY_OVERLAP_MS;
    if (!Number.isInteger(overlap_ms) || overlap_ms < HOUR_MS || overlap_ms > MAX_KEY_OVERLAP_MS) {
      throw new Error('overlap_ms must be between one hour and 30 days');
    }
    const { database, tenancy } = this.dependencies;
    const result = await database.transaction(async (tx) => {
      await repository.lockSigningKeySet(tx, LIVE_KEY_SET);
      const rotation = await this.rotateLockedSet(tx, LIVE_KEY_SET, overlap_ms);
      if (!rotation.rotated) return rotationResult(rotation, 0);
      const cause: EventCause = { request_id: actor.request_id, idempotency_key: null, api_version: CURRENT_API_VERSION };
      const feeds = await repository.feedsWithEndpoints(tx, { livemode: true });
      const announced_to = await this.announce(tx, rotation, feeds, cause);
      await tenancy.audit(tx, actor, null, 'webhook_signing_key.rotated', 'webhook_signing_key', rotation.key.kid, {
        livemode: true,
        previous_kid: rotation.previous_kid,
        generation: rotation.key.generation,
        signing_switches_at: formatTimestamp(rotation.key.not_before),
        previous_key_not_after: formatNullableTimestamp(rotation.previous_key_not_after),
      });
      return rotationResult(rotation, announced_to);
    }).catch(async (error: unknown) => {
      if (error instanceof RotationRaced) return this.rotate(actor, options);
      throw error;
    });
    this.forget();
    return result;
  }

  /**
   * The 114.00 THB sandbox scenario's action: rotates the sandbox key set of the merchant's brand, so
   * that the brand's sandbox deliveries are signed by a new kid 30 seconds from now (the spec asks for
   * within 60). Live keys and live feeds are never touched.
   *
   * If a sandbox rotation of the brand is already waiting for its switch, that one is answered
   * (`rotated: false`) and nothing new is made. A run asked again (`scenario_run_id`) answers what it
   * got the first time and writes nothing.
   *
   * Who is told: a new rotation sends webhook.key.rotating (livemode false) to the merchant's sandbox
   * feed and to every other sandbox feed of the brand that has an endpoint, because all of them are
   * signed by the set that changes. When a waiting rotation is answered, the merchant's feed is told
   * about it unless it already was.
   *
   * Transactions: without `tx` it runs in a transaction of its own, which is how a job handler calls it
   * (handlers run outside any transaction). With `tx` it runs in the caller's transaction and commits
   * or rolls back with it; it takes the set's lock and then event feed locks in merchant order, so it
   * must come before the caller locks any feed or wallet, or two such transactions could deadlock.
   */
  async rotateForSandboxScenario(request: SandboxKeyRotationRequest, tx?: Queryable): Promise<RotationResult> {
    const scenario_run_id = request.scenario_run_id ?? request.request_id;
    invariant(request.white_label_id !== '' && request.merchant_id !== '', 'a sandbox rotation names the brand and the merchant');
    invariant(
      typeof scenario_run_id === 'string' && scenario_run_id.length > 0 && scenario_run_id.length <= SCENARIO_RUN_ID_MAX_LENGTH,
      'a sandbox rotation names its scenario run (scenario_run_id or request_id)',
    );
    if (tx !== undefined) {
      // Inside the caller's transaction a lost race cannot be retried here: RotationRaced rolls the
      // caller back, and its job runs again.
      const result = await this.rotateSandboxSet(tx, request, scenario_run_id);
      this.forget();
      return result;
    }
    const result = await this.dependencies.database
      .transaction((own) => this.rotateSandboxSet(own, request, scenario_run_id))
      .catch(async (error: unknown) => {
        if (error instanceof RotationRaced) return this.rotateForSandboxScenario(request);
        throw error;
      });
    this.forget();
    return result;
  }

  private async rotateSandboxSet(tx: Queryable, request: SandboxKeyRotationRequest, scenario_run_id: string): Promise<RotationResult> {
    const { tenancy } = this.dependencies;
    const set = keySetOf({ white_label_id: request.white_label_id, livemode: false });
    // The lock comes before the run is looked up, so that the same run asked twice at once is answered once.
    await repository.lockSigningKeySet(tx, set);
    const earlier = await repository.findSandboxRotationRun(tx, request.white_label_id, request.merchant_id, scenario_run_id);
    if (earlier) return this.earlierRunResult(tx, set, earlier);

    const rotation = await this.rotateLockedSet(tx, set, SANDBOX_KEY_OVERLAP_MS);
    const feed = { white_label_id: request.white_label_id, merchant_id: request.merchant_id, livemode: false };
    let audience: { white_label_id: string; merchant_id: string; livemode: boolean }[];
    if (rotation.rotated) {
      const withEndpoints = await repository.feedsWithEndpoints(tx, { livemode: false, white_label_id: request.white_label_id });
      audience = withEndpoints.some((entry) => entry.merchant_id === request.merchant_id) ? withEndpoints : [...withEndpoints, feed];
    } else {
      audience = (await repository.wasKeyAnnouncedTo(tx, feed, rotation.key.kid)) ? [] : [feed];
    }
    const cause: EventCause = { request_id: request.request_id, idempotency_key: null, api_version: CURRENT_API_VERSION };
    const announced_to = await this.announce(tx, rotation, audience, cause);
    await repository.insertSandboxRotationRun(tx, {
      white_label_id: request.white_label_id,
      merchant_id: request.merchant_id,
      scenario_run_id,
      request_id: request.request_id,
      kid: rotation.key.kid,
      previous_kid: rotation.previous_kid,
      rotated: rotation.rotated,
      created_at: this.now(),
    });
    if (rotation.rotated) {
      const actor: Actor = { actor_type: 'system', actor_id: 'sandbox_scenario', request_id: request.request_id };
      await tenancy.audit(tx, actor, request.white_label_id, 'webhook_signing_key.rotated', 'webhook_signing_key', rotation.key.kid, {
        livemode: false,
        merchant_id: request.merchant_id,
        scenario_run_id,
        previous_kid: rotation.previous_kid,
        generation: rotation.key.generation,
        signing_switches_at: formatTimestamp(rotation.key.not_before),
        previous_key_not_after: formatNullableTimestamp(rotation.previous_key_not_after),
      });
    }
    return rotationResult(rotation, announced_to);
  }

  /**
   * What a run asked again gets: the same key and previous key as the first time, each as it stands now
   * (the new key may have switched in since). A key past its `not_after` is no longer listed; it is
   * reported as `retiring` with that past `not_after`.
   */
  private async earlierRunResult(tx: Queryable, set: SigningKeySetKey, run: repository.SandboxRotationRunRow): Promise<RotationResult> {
    const now = this.now();
    const key = await repository.findSigningKey(tx, set, run.kid);
    invariant(key !== null, 'a sandbox rotation run names a key of its set');
    const previous = run.previous_kid === null ? null : await repository.findSigningKey(tx, set, run.previous_kid);
    const status = keyStatuses(await repository.listSigningKeys(tx, set, now), now).find((entry) => entry.row.kid === key.kid)?.status ?? 'retiring';
    return rotationResult({ set, rotated: run.rotated, key, key_status: status, previous_kid: run.previous_kid, previous_key_not_after: previous?.not_after ?? null }, 0);
  }

  /**
   * Rotates one set; the caller holds the set's lock (`lockSigningKeySet`) in `tx`. A key waiting for
   * its switch is answered instead of making another; otherwise the new key signs from 30 seconds on
   * and every older key of the set is trusted until the switch plus `overlap_ms`.
   */
  private async rotateLockedSet(tx: Queryable, set: SigningKeySetKey, overlap_ms: number): Promise<SetRotation> {
    const { secretBox } = this.dependencies;
    const rows = await this.ensureKeys(tx, set);
    const now = this.now();
    const statuses = keyStatuses(rows, now);
    const waiting = statuses.find((entry) => entry.status === 'next');
    const active = statuses.find((entry) => entry.status === 'active') ?? null;
    if (waiting) {
      return { set, rotated: false, key: waiting.row, key_status: 'next', previous_kid: active?.row.kid ?? null, previous_key_not_after: active?.row.not_after ?? null };
    }
    // Counted over every key the set ever had, retired ones included, so a generation is never reused.
    const generation = (await repository.highestSigningKeyGeneration(tx, set)) + 1;
    const switchAt = new Date(now.getTime() + KEY_SWITCH_DELAY_MS);
    const notAfter = new Date(switchAt.getTime() + overlap_ms);
    const pair = generateSigningKeyPair();
    const row: SigningKeyRow = {
      white_label_id: set.white_label_id,
      livemode: set.livemode,
      kid: newWebhookId('signing_key'),
      generation,
      alg: 'Ed25519',
      public_key_spki: pair.public_key_spki_base64,
      raw_public_key: pair.raw_public_key_base64,
      private_key_sealed: secretBox.seal(pair.private_key_pkcs8_base64, PRIVATE_KEY_PURPOSE),
      not_before: switchAt,
      not_after: null,
      created_at: now,
    };
    // A concurrent rotation took this generation (only a process without the set's lock can: one
    // running older code during a deploy): its key stands and this one is dropped.
    if (!(await repository.insertSigningKey(tx, row))) throw new RotationRaced();
    await repository.retireSigningKeys(tx, set, row.kid, notAfter);
    return { set, rotated: true, key: row, key_status: 'next', previous_kid: active?.row.kid ?? null, previous_key_not_after: notAfter };
  }

  /**
   * Writes webhook.key.rotating to each feed, in the order given (sorted by brand and merchant, the
   * order every multi-feed writer locks feeds in), and records who was told. Returns how many.
   */
  private async announce(
    tx: Queryable,
    rotation: SetRotation,
    feeds: readonly { white_label_id: string; merchant_id: string; livemode: boolean }[],
    cause: EventCause,
  ): Promise<number> {
    const { events } = this.dependencies;
    const ordered = [...feeds].sort((left, right) =>
      left.white_label_id === right.white_label_id ? compareText(left.merchant_id, right.merchant_id) : compareText(left.white_label_id, right.white_label_id),
    );
    const result = rotationResult(rotation, 0);
    const told: KeyAnnouncementRow[] = [];
    for (const feed of ordered) {
      invariant(feed.livemode === rotation.set.livemode, 'a key rotation is announced only to feeds of its own environment');
      const envelope = await events.emitEvent(tx, {
        white_label_id: feed.white_label_id,
        merchant_id: feed.merchant_id,
        livemode: feed.livemode,
        type: KEY_ROTATING_EVENT,
        // The announcement is immutable, so it carries no previous_attributes.
        object: {
          object: 'webhook_key_rotation',
          id: rotation.key.kid,
          livemode: feed.livemode,
          new_key: result.new_key,
          previous_kid: result.previous_kid,
          signing_switches_at: result.signing_switches_at,
          previous_key_not_after: result.previous_key_not_after,
        },
        previous_attributes: undefined,
        cause,
      });
      told.push({ ...feed, kid: rotation.key.kid, event_id: envelope.id, created_at: this.now() });
    }
    await repository.insertKeyAnnouncements(tx, told);
    return told.length;
  }

  /**
   * The trusted keys of a set; the set's first key is created here when it has none, so a new database
   * (or a brand's first sandbox delivery) needs no set-up step. Two processes creating it at once both
   * insert the same generation and one wins.
   */
  private async ensureKeys(db: Queryable, set: SigningKeySetKey): Promise<SigningKeyRow[]> {
    const { secretBox } = this.dependencies;
    const rows = await repository.listSigningKeys(db, set, this.now());
    if (rows.length > 0) return rows;
    const now = this.now();
    const pair = generateSigningKeyPair();
    await repository.insertSigningKey(db, {
      white_label_id: set.white_label_id,
      livemode: set.livemode,
      kid: newWebhookId('signing_key'),
      generation: (await repository.highestSigningKeyGeneration(db, set)) + 1,
      alg: 'Ed25519',
      public_key_spki: pair.public_key_spki_base64,
      raw_public_key: pair.raw_public_key_base64,
      private_key_sealed: secretBox.seal(pair.private_key_pkcs8_base64, PRIVATE_KEY_PURPOSE),
      not_before: now,
      not_after: null,
      created_at: now,
    });
    return repository.listSigningKeys(db, set, this.now());
  }

  private remember(name: string, entry: { rows: SigningKeyRow[]; loaded_at_ms: number }): void {
    this.caches.delete(name);
    this.caches.set(name, entry);
    // The Map keeps insertion order, so the first entry is the set read longest ago.
    if (this.caches.size > CACHED_KEY_SETS_MAX) this.caches.delete(this.caches.keys().next().value!);
  }

  private privateKeyOf(row: SigningKeyRow): crypto.KeyObject {
    let key = this.privateKeys.get(row.kid);
    if (!key) {
      key = privateKeyFromPkcs8(this.dependencies.secretBox.open(row.private_key_sealed, PRIVATE_KEY_PURPOSE));
      this.privateKeys.set(row.kid, key);
      // Opened first is dropped first; a key still signing is simply opened again on its next use.
      if (this.privateKeys.size > OPENED_PRIVATE_KEYS_MAX) this.privateKeys.delete(this.privateKeys.keys().next().value!);
    }
    return key;
  }
}

/** Code-unit order, the order in which `EventsService.lockFeeds` sorts merchant ids before locking their feeds. */
function compareText(left: string, right: string): number {
  return left < right ? -1 : left > right ? 1 : 0;
}

class RotationRaced extends Error {
  constructor() {
    super('a concurrent rotation created this key generation');
    this.name = 'RotationRaced';
  }
}
