import type { Clock } from '../platform/clock.ts';
import type { Database, Queryable } from '../platform/db.ts';
import { ApiError, validationError } from '../platform/errors.ts';
import { formatNullableTimestamp, formatTimestamp } from '../platform/time.ts';
import { computePreviousAttributes } from '../events/envelope.ts';
import { type EventsService } from '../events/service.ts';
import { SYSTEM_CAUSE } from '../platform/cause.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { Actor } from '../platform/access.ts';
import type { Logger } from '../platform/logger.ts';
import * as deliveryRepository from './delivery-repository.ts';
import * as endpointRepository from './endpoint-repository.ts';
import * as fanoutRepository from './fanout-repository.ts';
import { checkEndpointUrl, type AddressPolicy, type HostResolver } from './url-policy.ts';
import {
  ENDPOINT_DISABLED_EVENT,
  MAX_ENDPOINTS_PER_FEED,
  newWebhookId,
  REPLAY_MAX_DELIVERIES,
  REPLAY_WINDOW_MS,
  UNSUBSCRIBABLE_EVENT_TYPES,
  type AttemptRow,
  type DeliveryRow,
  type DeliveryStatus,
  type EndpointRow,
} from './types.ts';

/**
 * Webhook endpoints and their deliveries, without HTTP: what the back-office routes and the CLI call.
 * Every administrative change writes its audit row in its own transaction. A brand scope of null is
 * the platform administrator's (any brand); any other scope sees only its brand, and another
 * brand's ids are not found, exactly like unknown ones.
 */

export interface EndpointView {
  object: 'webhook_endpoint';
  id: string;
  white_label_id: string;
  merchant_id: string;
  livemode: boolean;
  /** The merchant's webhook receiving address, under the spec's name. */
  deposit_url: string;
  /** The same address under the name this API used before issue 31, kept for the clients written then. */
  url: string;
  enabled: boolean;
  status: 'enabled' | 'disabled';
  disabled_reason: 'operator' | 'endpoint_gone' | null;
  /** Null: every event type. */
  event_types: string[] | null;
  /** Delivered whatever event_types says (spec: these five cannot be turned off). */
  always_delivered: string[];
  description: string | null;
  version: number;
  created_at: string;
  updated_at: string;
  disabled_at: string | null;
}

export interface AttemptView {
  object: 'webhook_delivery_attempt';
  delivery_id: string;
  sequence: number;
  round: number;
  attempt: number;
  resend: boolean;
  kid: string | null;
  status: 'succeeded' | 'failed' | 'lost';
  http_status: number | null;
  error: string | null;
  started_at: string;
  duration_ms: number | null;
  next_attempt_at: string | null;
}

export interface DeliveryView {
  object: 'webhook_delivery';
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  livemode: boolean;
  status: DeliveryStatus;
  failure_reason: string | null;
  round: number;
  round_attempts: number;
  attempt_count: number;
  resend: boolean;
  resend_requested: boolean;
  next_attempt_at: string | null;
  last_attempt_at: string | null;
  last_http_status: number | null;
  last_error: string | null;
  event_created_at: string;
  created_at: string;
  completed_at: string | null;
  attempts?: AttemptView[];
}

export function endpointView(row: EndpointRow): EndpointView {
  return {
    object: 'webhook_endpoint',
    id: row.endpoint_id,
    white_label_id: row.white_label_id,
    merchant_id: row.merchant_id,
    livemode: row.livemode,
    deposit_url: row.url,
    url: row.url,
    enabled: row.status === 'enabled',
    status: row.status === 'enabled' ? 'enabled' : 'disabled',
    disabled_reason: row.disabled_reason,
    event_types: row.event_types ? [...row.event_types] : null,
    always_delivered: [...UNSUBSCRIBABLE_EVENT_TYPES],
    description: row.description,
    version: row.version,
    created_at: formatTimestamp(row.created_at),
    updated_at: formatTimestamp(row.updated_at),
    disabled_at: formatNullableTimestamp(row.disabled_at),
  };
}

export function attemptView(row: AttemptRow): AttemptView {
  return {
    object: 'webhook_delivery_attempt',
    delivery_id: row.delivery_id,
    sequence: row.attempt_sequence,
    round: row.round,
    attempt: row.attempt,
    resend: row.resend,
    kid: row.kid,
    status: row.status,
    http_status: row.http_status,
    error: row.error,
    started_at: formatTimestamp(row.started_at),
    duration_ms: row.duration_ms,
    next_attempt_at: formatNullableTimestamp(row.next_attempt_at),
  };
}

export function deliveryView(row: DeliveryRow, attempts?: AttemptRow[]): DeliveryView {
  return {
    object: 'webhook_delivery',
    id: row.delivery_id,
    endpoint_id: row.endpoint_id,
    event_id: row.event_id,
    event_type: row.event_type,
    livemode: row.livemode,
    status: row.status,
    failure_reason: row.failure_reason,
    round: row.round,
    round_attempts: row.round_attempts,
    attempt_count: row.attempt_count,
    resend: row.resend,
    resend_requested: row.resend_requested,
    next_attempt_at: formatNullableTimestamp(row.next_attempt_at),
    last_attempt_at: formatNullableTimestamp(row.last_attempt_at),
    last_http_status: row.last_http_status,
    last_error: row.last_error,
    event_created_at: formatTimestamp(row.event_created_at),
    created_at: formatTimestamp(row.created_at),
    completed_at: formatNullableTimestamp(row.completed_at),
    ...(attempts ? { attempts: attempts.map(attemptView) } : {}),
  };
}

export interface CreateEndpointInput {
  merchant_id: string;
  livemode: boolean;
  url: string;
  /** The body field the address came in (`deposit_url`, or `url`, its earlier name), named by the address's errors. */
  address_field?: 'deposit_url' | 'url';
  event_types?: string[] | null;
  description?: string | null;
  enabled?: boolean;
}

export interface UpdateEndpointInput {
  url?: string;
  address_field?: 'deposit_url' | 'url';
  enabled?: boolean;
  event_types?: string[] | null;
  description?: string | null;
}

export interface ReplayInput {
  event_types?: string[] | null;
  created_after?: Date;
  created_before?: Date;
  only_failed?: boolean;
}

export interface ReplayResult {
  object: 'webhook_replay';
  endpoint_id: string;
  only_failed: boolean;
  created_after: string;
  created_before: string;
  event_types: string[] | null;
  /** Finished deliveries sent again. */
  rearmed: number;
  /** Deliveries made for events that had none to this endpoint (full replays only). */
  created: number;
  /** True when the limit was reached: repeat with a later created_after for the rest. */
  limit_reached: boolean;
}

export interface WebhookServiceDependencies {
  database: Database;
  clock: Clock;
  events: EventsService;
  tenancy: TenancyService;
  policy: AddressPolicy;
  resolve: HostResolver;
  sandbox_loopback: boolean;
  /** Where the warning about a sandbox endpoint on loopback goes. */
  logger?: Logger;
}

/** What the audit log keeps of a URL: its origin, never a path or query that might carry a secret. */
function urlOrigin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(invalid)';
  }
}

function sameTypes(left: string[] | null, right: string[] | null): boolean {
  if (left === null || right === null) return left === right;
  return left.length === right.length && left.every((type, index) => type === right[index]);
}

/** Subscriptions are stored sorted and without repeats, so that equal sets compare equal. */
function normaliseTypes(types: string[] | null | undefined): string[] | null {
  if (types === null || types === undefined) return null;
  return [...new Set(types)].sort();
}

export class WebhookService {
  constructor(private readonly dependencies: WebhookServiceDependencies) {}

  private async checkUrl(url: string, livemode: boolean, field: 'deposit_url' | 'url' = 'url'): Promise<string> {
    const checked = await checkEndpointUrl(url, {
      livemode,
      sandbox_loopback: this.dependencies.sandbox_loopback,
      policy: this.dependencies.policy,
      resolve: this.dependencies.resolve,
    });
    if (!checked.ok) throw validationError([{ path: field, reason: checked.reason, hint: checked.hint }]);
    if (checked.loopback) {
      // Allowed only because this is a development set-up; said in the log so that nobody mistakes it
      // for a deployment's behaviour. The origin only: the path may carry a merchant's secret.
      this.dependencies.logger?.warn(
        { url_origin: urlOrigin(checked.url) },
        'a sandbox webhook endpoint targets loopback: allowed only in the embedded development mode (PGlite, NODE_ENV not production) or with WEBHOOK_SANDBOX_LOOPBACK=true; production refuses it',
      );
    }
    return checked.url;
  }

  /** An endpoint visible in the scope, else 404; deleted endpoints are gone for good. */
  private async visibleEndpoint(db: Queryable, scope_white_label_id: string | null, endpoint_id: string, lock = false): Promise<EndpointRow> {
    const row = await endpointRepository.findEndpoint(db, endpoint_id, scope_white_label_id, lock);
    if (!row || row.status === 'deleted') throw new ApiError('resource_not_found');
    return row;
  }

  async createEndpoint(actor: Actor, scope_white_label_id: string | null, input: CreateEndpointInput): Promise<EndpointView> {
    const { database, clock, tenancy } = this.dependencies;
    const merchant = await tenancy.getMerchant(input.merchant_id, scope_white_label_id);
    if (!merchant) throw new ApiError('resource_not_found', { details: { field: 'merchant_id' } });
    // The URL is checked (and its name resolved) before the transaction: never a network call inside one.
    const url = await this.checkUrl(input.url, input.livemode, input.address_field);
    const now = clock.now();
    const enabled = input.enabled ?? true;
    const row: EndpointRow = {
      white_label_id: merchant.white_label_id,
      merchant_id: merchant.id,
      livemode: input.livemode,
      endpoint_id: newWebhookId('endpoint'),
      url,
      status: enabled ? 'enabled' : 'disabled',
      disabled_reason: enabled ? null : 'operator',
      event_types: normaliseTypes(input.event_types),
      description: input.description ?? null,
      version: 1,
      created_at: now,
      updated_at: now,
      disabled_at: enabled ? null : now,
      deleted_at: null,
    };
    await database.transaction(async (tx) => {
      const existing = await endpointRepository.countEndpointsOfFeed(tx, row.white_label_id, row.merchant_id, row.livemode);
      if (existing >= MAX_ENDPOINTS_PER_FEED) {
        throw validationError([{ path: 'merchant_id', reason: 'too_many_endpoints', hint: `at most ${MAX_ENDPOINTS_PER_FEED} per merchant and mode` }]);
      }
      await endpointRepository.insertEndpoint(tx, row);
      await fanoutRepository.ensureFeedCursor(tx, row, now);
      await tenancy.audit(tx, actor, row.white_label_id, 'webhook_endpoint.created', 'webhook_endpoint', row.endpoint_id, {
        merchant_id: row.merchant_id,
        livemode: row.livemode,
        url_origin: urlOrigin(row.url),
        enabled,
        event_types: row.event_types,
      });
    });
    return endpointView(row);
  }

  async listEndpoints(filter: endpointRepository.EndpointListFilter): Promise<{ data: EndpointView[]; has_more: boolean }> {
    const rows = await endpointRepository.listEndpoints(this.dependencies.database, { ...filter, limit: filter.limit + 1 });
    return { data: rows.slice(0, filter.limit).map(endpointView), has_more: rows.length > filter.limit };
  }

  async getEndpoint(scope_white_label_id: string | null, endpoint_id: string): Promise<EndpointView> {
    return endpointView(await this.visibleEndpoint(this.dependencies.database, scope_white_label_id, endpoint_id));
  }

  async updateEndpoint(actor: Actor, scope_white_label_id: string | null, endpoint_id: string, input: UpdateEndpointInput): Promise<EndpointView> {
    const { database, clock, tenancy } = this.dependencies;
    const current = await this.visibleEndpoint(database, scope_white_label_id, endpoint_id);
    const url = input.url === undefined ? undefined : await this.checkUrl(input.url, current.livemode, input.address_field);
    const updated = await database.transaction(async (tx) => {
      const before = await this.visibleEndpoint(tx, current.white_label_id, endpoint_id, true);
      const now = clock.now();
      const after: EndpointRow = { ...before };
      const changed: string[] = [];
      if (url !== undefined && url !== before.url) {
        after.url = url;
        changed.push('url');
      }
      if (input.event_types !== undefined) {
        const types = normaliseTypes(input.event_types);
        if (!sameTypes(types, before.event_types)) {
          after.event_types = types;
          changed.push('event_types');
        }
      }
      if (input.description !== undefined && input.description !== before.description) {
        after.description = input.description;
        changed.push('description');
      }
      if (input.enabled !== undefined && input.enabled !== (before.status === 'enabled')) {
        after.status = input.enabled ? 'enabled' : 'disabled';
        after.disabled_reason = input.enabled ? null : 'operator';
        after.disabled_at = input.enabled ? null : now;
        changed.push('enabled');
      }
      if (changed.length === 0) return before;
      after.version = before.version + 1;
      after.updated_at = now;
      if (!(await endpointRepository.updateEndpoint(tx, after, before.version))) throw new ApiError('resource_not_found');
      if (after.status === 'disabled' && before.status === 'enabled') {
        await deliveryRepository.failPendingDeliveries(tx, after.white_label_id, endpoint_id, 'endpoint_disabled', now);
      }
      await tenancy.audit(tx, actor, after.white_label_id, 'webhook_endpoint.updated', 'webhook_endpoint', endpoint_id, {
        changed,
        url_origin: urlOrigin(after.url),
        enabled: after.status === 'enabled',
        event_types: after.event_types,
      });
      return after;
    });
    return endpointView(updated);
  }

  /** Deletes an endpoint: it receives nothing more and answers 404, while its delivery history stays. */
  async deleteEndpoint(actor: Actor, scope_white_label_id: string | null, endpoint_id: string): Promise<{ object: 'webhook_endpoint'; id: string; deleted: true }> {
    const { database, clock, tenancy } = this.dependencies;
    await database.transaction(async (tx) => {
      const before = await this.visibleEndpoint(tx, scope_white_label_id, endpoint_id, true);
      const now = clock.now();
      const after: EndpointRow = { ...before, status: 'deleted', disabled_reason: null, disabled_at: null, deleted_at: now, version: before.version + 1, updated_at: now };
      if (!(await endpointRepository.updateEndpoint(tx, after, before.version))) throw new ApiError('resource_not_found');
      await deliveryRepository.failPendingDeliveries(tx, after.white_label_id, endpoint_id, 'endpoint_deleted', now);
      await tenancy.audit(tx, actor, after.white_label_id, 'webhook_endpoint.deleted', 'webhook_endpoint', endpoint_id, {
        url_origin: urlOrigin(before.url),
      });
    });
    return { object: 'webhook_endpoint', id: endpoint_id, deleted: true };
  }

  async listDeliveries(
    scope_white_label_id: string | null,
    endpoint_id: string,
    filter: { status: DeliveryStatus | null; event_id: string | null; starting_after: string | null; limit: number },
  ): Promise<{ data: DeliveryView[]; has_more: boolean }> {
    const endpoint = await this.visibleEndpoint(this.dependencies.database, scope_white_label_id, endpoint_id);
    const rows = await deliveryRepository.listDeliveries(this.dependencies.database, {
      white_label_id: endpoint.white_label_id,
      endpoint_id,
      ...filter,
      limit: filter.limit + 1,
    });
    return { data: rows.slice(0, filter.limit).map((row) => deliveryView(row)), has_more: rows.length > filter.limit };
  }

  /** One delivery with every attempt, oldest first. */
  async getDelivery(scope_white_label_id: string | null, endpoint_id: string, delivery_id: string): Promise<DeliveryView> {
    const { database } = this.dependencies;
    const endpoint = await this.visibleEndpoint(database, scope_white_label_id, endpoint_id);
    const row = await deliveryRepository.findDelivery(database, endpoint.white_label_id, endpoint_id, delivery_id);
    if (!row) throw new ApiError('resource_not_found');
    return deliveryView(row, await deliveryRepository.listAttempts(database, row.white_label_id, delivery_id));
  }

  /**
   * Sends a delivery again: same event, same bytes, a new round of up to 11 attempts with
   * X-PG-Resend: true. With an attempt in flight, the round starts when that attempt ends.
   */
  async resendDelivery(actor: Actor, scope_white_label_id: string | null, endpoint_id: string, delivery_id: string): Promise<DeliveryView> {
    const { database, clock, tenancy } = this.dependencies;
    const row = await database.transaction(async (tx) => {
      const endpoint = await this.visibleEndpoint(tx, scope_white_label_id, endpoint_id, true);
      if (endpoint.status !== 'enabled') throw new ApiError('webhook_endpoint_disabled', { details: { endpoint_id, disabled_reason: endpoint.disabled_reason } });
      const existing = await deliveryRepository.findDelivery(tx, endpoint.white_label_id, endpoint_id, delivery_id);
      if (!existing) throw new ApiError('resource_not_found');
      const rearmed = await deliveryRepository.rearmDelivery(tx, endpoint.white_label_id, delivery_id, clock.now());
      if (!rearmed) throw new ApiError('resource_not_found');
      await tenancy.audit(tx, actor, endpoint.white_label_id, 'webhook_delivery.resent', 'webhook_delivery', delivery_id, {
        endpoint_id,
        event_id: rearmed.event_id,
        round: rearmed.round,
        deferred: rearmed.resend_requested,
      });
      return rearmed;
    });
    return deliveryView(row);
  }

  /**
   * Replays an endpoint's deliveries of events created in [created_after, created_before), by default
   * the failed ones of the last 72 hours. A full replay (only_failed false) also sends the
   * succeeded ones again and makes deliveries for matching events that had none to this endpoint.
   */
  async replay(actor: Actor, scope_white_label_id: string | null, endpoint_id: string, input: ReplayInput): Promise<ReplayResult> {
    const { database, clock, tenancy } = this.dependencies;
    const now = clock.now();
    const earliest = new Date(now.getTime() - REPLAY_WINDOW_MS);
    const created_after = input.created_after ?? earliest;
    // Without an end, the window includes events written at this very instant (the bound is exclusive).
    const created_before = input.created_before ?? new Date(now.getTime() + 1);
    const only_failed = input.only_failed ?? true;
    if (created_after.getTime() < earliest.getTime()) {
      throw validationError([{ path: 'created_after', reason: 'outside_replay_window', hint: 'at most 72 hours ago' }]);
    }
    if (created_before.getTime() <= created_after.getTime()) {
      throw validationError([{ path: 'created_before', reason: 'must_be_after_created_after' }]);
    }
    const event_types = normaliseTypes(input.event_types);
    return database.transaction(async (tx) => {
      const endpoint = await this.visibleEndpoint(tx, scope_white_label_id, endpoint_id, true);
      if (endpoint.status !== 'enabled') throw new ApiError('webhook_endpoint_disabled', { details: { endpoint_id, disabled_reason: endpoint.disabled_reason } });
      const rearmed = await deliveryRepository.rearmDeliveries(
        tx,
        { white_label_id: endpoint.white_label_id, endpoint_id, event_types, created_after, created_before, only_failed, limit: REPLAY_MAX_DELIVERIES },
        now,
      );
      let created = 0;
      if (!only_failed && rearmed.length < REPLAY_MAX_DELIVERIES) {
        // Without explicit types, a full replay follows the endpoint's subscription (plus the five).
        const types = event_types ?? (endpoint.event_types ? [...endpoint.event_types, ...UNSUBSCRIBABLE_EVENT_TYPES] : null);
        const missing = await fanoutRepository.eventsWithoutDelivery(tx, endpoint, types, created_after, created_before, REPLAY_MAX_DELIVERIES - rearmed.length);
        created = await fanoutRepository.insertDeliveries(
          tx,
          endpoint,
          missing.map((event) => ({ ...event, endpoint_id, delivery_id: newWebhookId('delivery') })),
          true,
          now,
        );
      }
      const result: ReplayResult = {
        object: 'webhook_replay',
        endpoint_id,
        only_failed,
        created_after: formatTimestamp(created_after),
        created_before: formatTimestamp(created_before),
        event_types,
        rearmed: rearmed.length,
        created,
        limit_reached: rearmed.length + created >= REPLAY_MAX_DELIVERIES,
      };
      await tenancy.audit(tx, actor, endpoint.white_label_id, 'webhook_endpoint.replayed', 'webhook_endpoint', endpoint_id, {
        only_failed,
        created_after: result.created_after,
        created_before: result.created_before,
        event_types,
        rearmed: result.rearmed,
        created,
      });
      return result;
    });
  }

  /**
   * An endpoint answered 410: it is disabled at once (reason endpoint_gone), its other pending
   * deliveries end, and its merchant is told with webhook.endpoint.disabled, all in the caller's
   * transaction (the one recording that answer). An endpoint no longer enabled is left alone.
   */
  async disableGoneEndpoint(tx: Queryable, white_label_id: string, endpoint_id: string): Promise<void> {
    const { clock, events } = this.dependencies;
    const before = await endpointRepository.findEndpoint(tx, endpoint_id, white_label_id, true);
    if (!before || before.status !== 'enabled') return;
    const now = clock.now();
    const after: EndpointRow = {
      ...before,
      status: 'disabled',
      disabled_reason: 'endpoint_gone',
      disabled_at: now,
      version: before.version + 1,
      updated_at: now,
    };
    if (!(await endpointRepository.updateEndpoint(tx, after, before.version))) return;
    await deliveryRepository.failPendingDeliveries(tx, white_label_id, endpoint_id, 'endpoint_disabled', now);
    const beforeView = endpointView(before) as unknown as Record<string, unknown>;
    const afterView = endpointView(after) as unknown as Record<string, unknown>;
    await events.emitEvent(tx, {
      white_label_id,
      merchant_id: after.merchant_id,
      livemode: after.livemode,
      type: ENDPOINT_DISABLED_EVENT,
      object: afterView,
      previous_attributes: computePreviousAttributes(beforeView, afterView),
      cause: SYSTEM_CAUSE,
    });
  }
}
