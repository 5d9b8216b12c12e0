import fs from 'node:fs';
import { z } from 'zod';
import { SECOND_MS } from '../platform/time.ts';

/**
 * Configuration of webhook delivery, read from the environment with the same rules as
 * src/platform/config.ts: a bad value stops the start with a message naming the variable. It lives
 * beside the dispatcher it tunes, and only this module reads it.
 */
export interface WebhookSettings {
  /** No answer within this is a failed attempt (spec: 15 seconds). */
  timeout_ms: number;
  /** Attempts sending at once to one endpoint from one process (leases: twice this, over all processes). */
  endpoint_concurrency: number;
  /** Leased deliveries (sending or waiting for their endpoint's slot) in one process. */
  max_in_flight: number;
  /** Pause between polls of an idle dispatcher. */
  poll_interval_ms: number;
  /**
   * Sandbox endpoints may use this machine's loopback (HTTP or HTTPS): on by default in the embedded
   * development mode (PGlite and NODE_ENV not production), off by default elsewhere, and never in
   * production; WEBHOOK_SANDBOX_LOOPBACK sets it explicitly (see `sandboxLoopbackOf`).
   */
  sandbox_loopback: boolean;
  /** Extra trusted certificate authorities (PEM), on top of Node's bundled roots. */
  extra_ca_pem: string[];
}

export const DEFAULT_WEBHOOK_SETTINGS: WebhookSettings = {
  timeout_ms: 15 * SECOND_MS,
  endpoint_concurrency: 8,
  max_in_flight: 256,
  poll_interval_ms: 200,
  sandbox_loopback: false,
  extra_ca_pem: [],
};

const booleanText = z.enum(['true', 'false', '1', '0']).transform((text) => text === 'true' || text === '1');

const environmentSchema = z.object({
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).optional(),
  WEBHOOK_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(100).optional(),
  WEBHOOK_MAX_IN_FLIGHT: z.coerce.number().int().min(1).max(10_000).optional(),
  WEBHOOK_POLL_INTERVAL_MS: z.coerce.number().int().min(10).max(60_000).optional(),
  WEBHOOK_SANDBOX_LOOPBACK: booleanText.optional(),
  /** A PEM file of extra trusted authorities (a private CA of the deployment). */
  WEBHOOK_CA_FILE: z.string().min(1).optional(),
});

/** Where the service runs, as far as the loopback rule cares. */
export interface DeploymentMode {
  /** The database is the embedded PGlite (no DATABASE_URL). */
  embedded_database: boolean;
}

/**
 * Whether sandbox endpoints may target loopback. The embedded development mode (PGlite, NODE_ENV not
 * production) allows it without a flag, since the service and the developer's receiver share a
 * laptop; anything else needs the operator's WEBHOOK_SANDBOX_LOOPBACK=true, and production refuses to
 * start with it rather than send a tenant's events to its own host. `false` turns it off everywhere.
 */
export function sandboxLoopbackOf(explicit: boolean | undefined, production: boolean, mode: DeploymentMode): boolean {
  if (production && explicit === true) {
    throw new Error('invalid configuration: WEBHOOK_SANDBOX_LOOPBACK cannot be true with NODE_ENV=production (webhooks never go to loopback in production)');
  }
  if (explicit !== undefined) return explicit;
  return mode.embedded_database && !production;
}

export function loadWebhookSettings(environment: NodeJS.ProcessEnv = process.env, mode: DeploymentMode = { embedded_database: false }): WebhookSettings {
  const parsed = environmentSchema.safeParse(environment);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`invalid configuration: ${problems.join('; ')}`);
  }
  const values = parsed.data;
  let extra_ca_pem: string[] = [];
  if (values.WEBHOOK_CA_FILE) {
    try {
      extra_ca_pem = [fs.readFileSync(values.WEBHOOK_CA_FILE, 'utf8')];
    } catch (error) {
      throw new Error(`invalid configuration: WEBHOOK_CA_FILE cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  return {
    timeout_ms: values.WEBHOOK_TIMEOUT_MS ?? DEFAULT_WEBHOOK_SETTINGS.timeout_ms,
    endpoint_concurrency: values.WEBHOOK_ENDPOINT_CONCURRENCY ?? DEFAULT_WEBHOOK_SETTINGS.endpoint_concurrency,
    max_in_flight: values.WEBHOOK_MAX_IN_FLIGHT ?? DEFAULT_WEBHOOK_SETTINGS.max_in_flight,
    poll_interval_ms: values.WEBHOOK_POLL_INTERVAL_MS ?? DEFAULT_WEBHOOK_SETTINGS.poll_interval_ms,
    sandbox_loopback: sandboxLoopbackOf(values.WEBHOOK_SANDBOX_LOOPBACK, environment.NODE_ENV === 'production', mode),
    extra_ca_pem,
  };
}
