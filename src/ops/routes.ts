import type { FastifyInstance } from 'fastify';
import type { Database } from '../platform/db.ts';
import type { Metrics } from './metrics.ts';
import { constantTimeEqual } from '../platform/crypto.ts';

/**
 * Operational endpoints, outside the API contract and without rate buckets: liveness (`/healthz`:
 * the process answers), readiness (`/readyz`: started, not stopping, database answering) and
 * Prometheus metrics (`/metrics`). The metrics show every tenant's traffic by route, so they are served
 * only to a scraper that sends the configured `METRICS_TOKEN` as a bearer credential (401 otherwise), and
 * not at all (404) when no token is configured.
 */
/** What the operational endpoints read. */
export interface OperationsRouteDependencies {
  database: Database;
  config: { metrics_token: string | null };
  metrics: Metrics;
}

export function registerOperationsRoutes(app: FastifyInstance, services: OperationsRouteDependencies, isReady: () => boolean): void {
  app.get('/healthz', async (_request, reply) => reply.code(200).send({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    if (!isReady()) return reply.code(503).send({ status: 'not_ready' });
    try {
      await services.database.query('SELECT 1');
      return reply.code(200).send({ status: 'ready', database: services.database.engine });
    } catch {
      return reply.code(503).send({ status: 'database_unavailable' });
    }
  });

  app.get('/metrics', async (request, reply) => {
    const expected = services.config.metrics_token;
    if (expected === null) return reply.code(404).send({ status: 'not_served' });
    const presented = /^Bearer (\S+)$/i.exec(String(request.headers.authorization ?? ''))?.[1] ?? '';
    if (!constantTimeEqual(presented, expected)) return reply.code(401).header('WWW-Authenticate', 'Bearer realm="metrics"').send({ status: 'unauthorized' });
    const body = await services.metrics.registry.metrics();
    return reply.code(200).header('content-type', services.metrics.registry.contentType).send(body);
  });
}
