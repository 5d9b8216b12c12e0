import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { createTestApp, type TestApp } from './app.ts';
import type { TestDatabase } from './database.ts';
import { createTestCertificates, type TestCertificates } from './webhook-receivers.ts';
import { SYSTEM_CAUSE } from '../../src/platform/cause.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import { newId } from '../../src/platform/ids.ts';
import type { Webhooks, WebhookOptions } from '../../src/webhooks/index.ts';
import type { WebhookSettings } from '../../src/webhooks/settings.ts';
import type { EndpointView } from '../../src/webhooks/service.ts';
import { isLoopbackAddress, isPublicAddress, type AddressPolicy } from '../../src/webhooks/url-policy.ts';

/**
 * A test service instance with the webhooks module on a TestClock, a test CA its delivery client
 * trusts (passed explicitly as `extra_ca_pem`, never through NODE_EXTRA_CA_CERTS), the operator's
 * sandbox-loopback switch on, and helpers to write events and call the back office.
 */

/** Lets live endpoints reach 127.0.0.1, where the tests' receivers run; production never does. */
export const TEST_POLICY_WITH_LIVE_LOOPBACK: AddressPolicy = {
  allows: (address) => isLoopbackAddress(address) || isPublicAddress(address),
};

export interface WebhookTestApp {
  app: TestApp;
  webhooks: Webhooks;
  certs: TestCertificates;
  /** Writes one event to the outbox for a merchant (the sandbox merchant by default). */
  emit(type: string, object: Record<string, unknown>, options?: { livemode?: boolean; merchant_id?: string; white_label_id?: string }): Promise<EventEnvelope>;
  /** Creates an endpoint through the back office and returns it (201 asserted). */
  createEndpoint(body: Record<string, unknown>, token?: string): Promise<EndpointView>;
  backoffice(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, token?: string): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export interface WebhookTestAppOptions {
  settings?: Partial<WebhookSettings>;
  policy?: AddressPolicy;
  testDatabase?: TestDatabase;
  certs?: TestCertificates;
  worker_id?: string;
  lookup?: WebhookOptions['lookup'];
}

export async function createWebhookTestApp(options: WebhookTestAppOptions = {}): Promise<WebhookTestApp> {
  const certs = options.certs ?? createTestCertificates();
  const webhookOptions: WebhookOptions = {
    settings: {
      timeout_ms: 1_000,
      poll_interval_ms: 20,
      endpoint_concurrency: 4,
      max_in_flight: 32,
      sandbox_loopback: true,
      extra_ca_pem: [certs.ca_pem],
      ...options.settings,
    },
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.worker_id ? { worker_id: options.worker_id } : {}),
    ...(options.lookup ? { lookup: options.lookup } : {}),
  };
  const app = await createTestApp({ webhooks: webhookOptions, testDatabase: options.testDatabase });
  const webhooks = app.instance.services.webhooks;

  async function backoffice(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown, token?: string) {
    const headers: Record<string, string> = { authorization: `Bearer ${token ?? app.operator_token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return app.instance.app.inject({ method, url, headers, payload: body === undefined ? undefined : JSON.stringify(body) });
  }

  return {
    app,
    webhooks,
    certs,
    async emit(type, object, emitOptions = {}) {
      const services = app.instance.services;
      return services.database.transaction((tx) =>
        services.events.emitEvent(tx, {
          white_label_id: emitOptions.white_label_id ?? app.sandbox.white_label_id,
          merchant_id: emitOptions.merchant_id ?? app.sandbox.merchant_id,
          livemode: emitOptions.livemode ?? false,
          type,
          object,
          previous_attributes: type.endsWith('.created') ? null : { version: Number(object.version ?? 1) - 1 },
          cause: SYSTEM_CAUSE,
        }),
      );
    },
    async createEndpoint(body, token) {
      const response = await backoffice('POST', '/v1/bo/webhooks', { merchant_id: app.sandbox.merchant_id, mode: 'test', ...body }, token);
      expect(response.statusCode, response.body).toBe(201);
      return response.json() as EndpointView;
    },
    backoffice,
    async close() {
      await webhooks.dispatcher.stop();
      await app.close();
      if (!options.certs) certs.remove();
    },
  };
}

/** A deposit-like object at a version, for events. */
export function depositObject(id: string, version: number, status: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { object: 'deposit', id, version, status, amount_minor: 10_000, ...extra };
}

export function newDepositId(): string {
  return newId('deposit');
}
