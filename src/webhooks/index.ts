import type dns from 'node:dns';
import client from 'prom-client';
import type { Clock } from '../platform/clock.ts';
import type { Database } from '../platform/db.ts';
import type { SecretBox } from '../platform/crypto.ts';
import type { Logger } from '../platform/logger.ts';
import { DAY_MS } from '../platform/time.ts';
import { BACKLOG_COUNT_LIMIT, type Backlog } from '../platform/backlog.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { EventsService } from '../events/service.ts';
import type { TenancyService } from '../tenancy/service.ts';
import type { RouteRegistrar } from '../http/context.ts';
import { DeliveryDispatcher, type DispatcherMetrics } from './dispatcher.ts';
import { DeliveryClient } from './http-client.ts';
import { deleteFinishedDeliveriesBefore, readDueDeliveryBacklog } from './delivery-repository.ts';
import { registerWebhookRoutesWith } from './routes.ts';
import { WebhookService } from './service.ts';
import { loadWebhookSettings, type WebhookSettings } from './settings.ts';
import { SigningKeyService } from './signing-keys.ts';
import { defaultAddressPolicy, systemResolver, type AddressPolicy, type HostResolver } from './url-policy.ts';

/**
 * The webhooks module assembled: the endpoint service, the signing keys, the delivery dispatcher and
 * the routes, built once per service instance by the composition root (src/app.ts) with the options it
 * was given. `registerRoutes` is an ordinary route module; the dispatcher is started and stopped with the
 * worker role.
 */

export interface WebhookDependencies {
  database: Database;
  clock: Clock;
  logger: Logger;
  secretBox: SecretBox;
  events: EventsService;
  tenancy: TenancyService;
  metrics?: Metrics;
}

export interface WebhookOptions {
  /** Where the WEBHOOK_* variables are read (process.env by default). */
  environment?: NodeJS.ProcessEnv;
  /** Overrides of the environment's settings. */
  settings?: Partial<WebhookSettings>;
  /**
   * Which addresses may receive webhooks. Production keeps the default (public addresses only, plus
   * loopback for the sandbox when the operator enables it); tests that run a live-mode receiver on
   * 127.0.0.1 pass their own.
   */
  policy?: AddressPolicy;
  /** Name resolution for the write-time URL check and for connections. */
  resolve?: HostResolver;
  lookup?: typeof dns.lookup;
  worker_id?: string;
}

export interface Webhooks {
  settings: WebhookSettings;
  service: WebhookService;
  signingKeys: SigningKeyService;
  dispatcher: DeliveryDispatcher;
  /** Registers the routes on a registrar (what `registerWebhookRoutes` does for the instance). */
  registerRoutes(registrar: RouteRegistrar): void;
  /** Housekeeping: deletes finished deliveries and their attempts older than the retention. */
  purgeFinished(limit?: number): Promise<number>;
  /** Deliveries due and not yet taken by a dispatcher, and since when the oldest has waited: the dispatcher's backlog gauge. */
  deliveryBacklog(): Promise<Backlog>;
}

/** Finished deliveries and their attempts are kept this long for the back office. */
export const DELIVERY_RETENTION_MS = 31 * DAY_MS;

function dispatcherMetrics(metrics: Metrics | undefined): DispatcherMetrics | undefined {
  if (!metrics) return undefined;
  const attempts = new client.Counter({
    name: 'webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (succeeded, or the error word)',
    labelNames: ['outcome'],
    registers: [metrics.registry],
  });
  const duration = new client.Histogram({
    name: 'webhook_attempt_duration_seconds',
    help: 'Time from sending a webhook attempt to its answer',
    buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 3, 5, 15],
    registers: [metrics.registry],
  });
  return {
    attempt(outcome, duration_ms) {
      attempts.inc({ outcome });
      duration.observe(duration_ms / 1000);
    },
  };
}

export function createWebhooks(dependencies: WebhookDependencies, options: WebhookOptions = {}): Webhooks {
  const settings: WebhookSettings = {
    ...loadWebhookSettings(options.environment, { embedded_database: dependencies.database.engine === 'pglite' }),
    ...options.settings,
  };
  const policy = options.policy ?? defaultAddressPolicy({ sandbox_loopback: settings.sandbox_loopback });
  const signingKeys = new SigningKeyService(dependencies);
  const service = new WebhookService({
    database: dependencies.database,
    clock: dependencies.clock,
    events: dependencies.events,
    tenancy: dependencies.tenancy,
    policy,
    resolve: options.resolve ?? systemResolver,
    sandbox_loopback: settings.sandbox_loopback,
    logger: dependencies.logger,
  });
  const deliveryClient = new DeliveryClient({
    timeout_ms: settings.timeout_ms,
    endpoint_concurrency: settings.endpoint_concurrency,
    policy,
    sandbox_loopback: settings.sandbox_loopback,
    extra_ca_pem: settings.extra_ca_pem,
    lookup: options.lookup,
  });
  const dispatcher = new DeliveryDispatcher({
    database: dependencies.database,
    clock: dependencies.clock,
    logger: dependencies.logger,
    signingKeys,
    client: deliveryClient,
    endpointGone: (tx, white_label_id, endpoint_id) => service.disableGoneEndpoint(tx, white_label_id, endpoint_id),
    settings,
    metrics: dispatcherMetrics(dependencies.metrics),
    worker_id: options.worker_id,
    openBody: (stored_text) => dependencies.events.openStoredText(stored_text),
  });
  const webhooks: Webhooks = {
    settings,
    service,
    signingKeys,
    dispatcher,
    registerRoutes: (registrar) => registerWebhookRoutesWith(registrar, () => webhooks, dependencies.tenancy),
    purgeFinished: (limit = 5000) =>
      deleteFinishedDeliveriesBefore(dependencies.database, new Date(dependencies.clock.now().getTime() - DELIVERY_RETENTION_MS), limit),
    deliveryBacklog: () => readDueDeliveryBacklog(dependencies.database, dependencies.clock.now(), BACKLOG_COUNT_LIMIT),
  };
  return webhooks;
}

export { DeliveryDispatcher } from './dispatcher.ts';
export { WebhookService } from './service.ts';
export { SigningKeyService } from './signing-keys.ts';
export { loadWebhookSettings, DEFAULT_WEBHOOK_SETTINGS, type WebhookSettings } from './settings.ts';
export { signWebhookPayload, parseSignatureHeader } from './signing.ts';
