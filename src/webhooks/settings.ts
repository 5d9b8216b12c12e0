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
  /** The operator's explicit switch: sandbox endpoints may use this machine's loopback (HTTP or HTTPS). */
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

export function loadWebhookSettings(environment: NodeJS.ProcessEnv = process.env): WebhookSettings {
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
    sandbox_loopback: values.WEBHOOK_SANDBOX_LOOPBACK ?? DEFAULT_WEBHOOK_SETTINGS.sandbox_loopback,
    extra_ca_pem,
  };
}
