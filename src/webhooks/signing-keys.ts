import type crypto from 'node:crypto';
import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import type { SecretBox } from '../platform/crypto.ts';
import { formatNullableTimestamp, formatTimestamp, HOUR_MS, SECOND_MS } from '../platform/time.ts';
import { CURRENT_API_VERSION } from '../events/envelope.ts';
import type { EventCause, EventsService } from '../events/service.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { Actor } from '../tenancy/types.ts';
import * as repository from './repository.ts';
import { generateSigningKeyPair, privateKeyFromPkcs8 } from './signing.ts';
import { KEY_ROTATING_EVENT, newWebhookId, type SigningKeyRow } from './types.ts';

/**
 * The service's Ed25519 signing keys. Private keys exist only here, sealed under the master key; the
 * public halves are published at GET /v1/webhooks/signing-keys.
 *
 * Rotation publishes the new key at once with `not_before` 30 seconds ahead, announces it with
 * `webhook.key.rotating`, and gives every older key a `not_after`: it stays listed and trusted until
 * then. Which key signs is a function of the clock (the newest key whose `not_before` has come), so
 * every process switches at the same instant without a job; a process reloads the key list at least
 * every 10 seconds, which is shorter than the 30-second lead, so the switch is never late.
 */
export const KEY_SWITCH_DELAY_MS = 30 * SECOND_MS;
/** How long a replaced key stays listed after the switch, unless the rotation says otherwise. */
export const DEFAULT_KEY_OVERLAP_MS = 24 * HOUR_MS;
export const MAX_KEY_OVERLAP_MS = 30 * 24 * HOUR_MS;
/** The signer re-reads the key list this often (clock time). */
export const SIGNER_CACHE_MS = 10 * SECOND_MS;
const PRIVATE_KEY_PURPOSE = 'webhook_signing_key.private_key';

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
  /** False when a rotation was already waiting for its switch: that one is answered instead. */
  rotated: boolean;
  new_key: SigningKeyRecord;
  previous_kid: string | null;
  signing_switches_at: string;
  previous_key_not_after: string | null;
  /** Feeds (merchant and environment) that were sent webhook.key.rotating. */
  announced_to: number;
}

/** Keys still trusted at `now`, each with its status; the newest key already valid is the one that signs. */
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

export class SigningKeyService {
  private cache: { rows: SigningKeyRow[]; loaded_at_ms: number } | null = null;
  private readonly privateKeys = new Map<string, crypto.KeyObject>();

  constructor(private readonly dependencies: SigningKeyDependencies) {}

  /** Every key still trusted, newest first, as the public endpoint lists them. */
  async listPublished(): Promise<SigningKeyRecord[]> {
    const rows = await this.ensureKeys(this.dependencies.database);
    return keyStatuses(rows, this.dependencies.clock.now()).map(({ row, status }) => keyRecord(row, status));
  }

  /** The key that signs now. */
  async signer(): Promise<Signer> {
    const { clock, database } = this.dependencies;
    const checkedAt = clock.now().getTime();
    if (this.cache === null || checkedAt - this.cache.loaded_at_ms >= SIGNER_CACHE_MS || checkedAt < this.cache.loaded_at_ms) {
      this.cache = { rows: await this.ensureKeys(database), loaded_at_ms: checkedAt };
    }
    // The instant is read after the keys: a first key created just now has a not_before later than
    // any instant read before it was made.
    let active = keyStatuses(this.cache.rows, clock.now()).find((entry) => entry.status === 'active');
    if (!active) {
      // A cached list can be older than the only valid key (another process made it): read once more.
      this.cache = { rows: await this.ensureKeys(database), loaded_at_ms: clock.now().getTime() };
      active = keyStatuses(this.cache.rows, clock.now()).find((entry) => entry.status === 'active');
    }
    if (!active) throw new Error('no webhook signing key is valid now');
    return { kid: active.row.kid, private_key: this.privateKeyOf(active.row) };
  }

  /** Drops the cached key list, so the next signature reads the keys again. */
  forget(): void {
    this.cache = null;
  }

  /**
   * Rotates the platform key: the new key is published now and signs from 30 seconds on; older keys
   * stay trusted until the switch plus `overlap_ms`. Every feed with an endpoint is sent
   * webhook.key.rotating in the same transaction. A rotation asked for while another is still waiting
   * for its switch answers that one and changes nothing.
   */
  async rotate(actor: Actor, options: { overlap_ms?: number } = {}): Promise<RotationResult> {
    const overlap_ms = options.overlap_ms ?? DEFAULT_KEY_OVERLAP_MS;
    if (!Number.isInteger(overlap_ms) || overlap_ms < HOUR_MS || overlap_ms > MAX_KEY_OVERLAP_MS) {
      throw new Error('overlap_ms must be between one hour and 30 days');
    }
    const { clock, database, secretBox, events, tenancy } = this.dependencies;
    const now = clock.now();
    const pair = generateSigningKeyPair();
    const result = await database.transaction(async (tx) => {
      const rows = await this.ensureKeys(tx);
      const statuses = keyStatuses(rows, now);
      const waiting = statuses.find((entry) => entry.status === 'next');
      const active = statuses.find((entry) => entry.status === 'active') ?? null;
      if (waiting) {
        return {
          object: 'webhook_key_rotation' as const,
          rotated: false,
          new_key: keyRecord(waiting.row, 'next'),
          previous_kid: active?.row.kid ?? null,
          signing_switches_at: formatTimestamp(waiting.row.not_before),
          previous_key_not_after: formatNullableTimestamp(active?.row.not_after ?? null),
          announced_to: 0,
        };
      }
      const generation = rows.reduce((highest, row) => Math.max(highest, row.generation), 0) + 1;
      const switchAt = new Date(now.getTime() + KEY_SWITCH_DELAY_MS);
      const notAfter = new Date(switchAt.getTime() + overlap_ms);
      const row: SigningKeyRow = {
        white_label_id: repository.PLATFORM_KEY_SCOPE,
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
      // A concurrent rotation took this generation: its key stands and this one is dropped.
      if (!(await repository.insertSigningKey(tx, row))) throw new RotationRaced();
      await repository.retireSigningKeys(tx, row.kid, notAfter);
      const rotation = {
        object: 'webhook_key_rotation' as const,
        rotated: true,
        new_key: keyRecord(row, 'next'),
        previous_kid: active?.row.kid ?? null,
        signing_switches_at: formatTimestamp(switchAt),
        previous_key_not_after: formatTimestamp(notAfter),
        announced_to: 0,
      };
      const cause: EventCause = { request_id: actor.request_id, idempotency_key: null, api_version: CURRENT_API_VERSION };
      const feeds = await repository.feedsWithEndpoints(tx);
      for (const feed of feeds) {
        await events.emitEvent(tx, {
          white_label_id: feed.white_label_id,
          merchant_id: feed.merchant_id,
          livemode: feed.livemode,
          type: KEY_ROTATING_EVENT,
          // The announcement is immutable, so it carries no previous_attributes.
          object: {
            object: 'webhook_key_rotation',
            id: row.kid,
            new_key: rotation.new_key,
            previous_kid: rotation.previous_kid,
            signing_switches_at: rotation.signing_switches_at,
            previous_key_not_after: rotation.previous_key_not_after,
          },
          previous_attributes: undefined,
          cause,
        });
      }
      rotation.announced_to = feeds.length;
      await tenancy.audit(tx, actor, null, 'webhook_signing_key.rotated', 'webhook_signing_key', row.kid, {
        previous_kid: rotation.previous_kid,
        generation,
        signing_switches_at: rotation.signing_switches_at,
        previous_key_not_after: rotation.previous_key_not_after,
      });
      return rotation;
    }).catch(async (error: unknown) => {
      if (error instanceof RotationRaced) return this.rotate(actor, options);
      throw error;
    });
    this.forget();
    return result;
  }

  /**
   * The platform's keys; the first key is created here when there is none, so a new database needs
   * no set-up step. Two processes creating it at once both insert generation 1 and one wins.
   */
  private async ensureKeys(db: Queryable): Promise<SigningKeyRow[]> {
    const rows = await repository.listSigningKeys(db);
    if (rows.length > 0) return rows;
    const now = this.dependencies.clock.now();
    const pair = generateSigningKeyPair();
    await repository.insertSigningKey(db, {
      white_label_id: repository.PLATFORM_KEY_SCOPE,
      kid: newWebhookId('signing_key'),
      generation: 1,
      alg: 'Ed25519',
      public_key_spki: pair.public_key_spki_base64,
      raw_public_key: pair.raw_public_key_base64,
      private_key_sealed: this.dependencies.secretBox.seal(pair.private_key_pkcs8_base64, PRIVATE_KEY_PURPOSE),
      not_before: now,
      not_after: null,
      created_at: now,
    });
    return repository.listSigningKeys(db);
  }

  private privateKeyOf(row: SigningKeyRow): crypto.KeyObject {
    let key = this.privateKeys.get(row.kid);
    if (!key) {
      key = privateKeyFromPkcs8(this.dependencies.secretBox.open(row.private_key_sealed, PRIVATE_KEY_PURPOSE));
      this.privateKeys.set(row.kid, key);
    }
    return key;
  }
}

class RotationRaced extends Error {
  constructor() {
    super('a concurrent rotation created this key generation');
    this.name = 'RotationRaced';
  }
}
