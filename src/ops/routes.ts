import type { FastifyInstance } from 'fastify';
import type { Services } from '../http/context.ts';

/**
 * Operational endpoints, outside the API contract and without rate buckets: liveness (`/healthz`:
 * the process answers), readiness (`/readyz`: started, not stopping, database answering) and
 * Prometheus metrics (`/metrics`).
 */
export function registerOperationsRoutes(app: FastifyInstance, services: Services, isReady: () => boolean): void {
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

  app.get('/metrics', async (_request, reply) => {
    const body = await services.metrics.registry.metrics();
    return reply.code(200).header('content-type', services.metrics.registry.contentType).send(body);
  });
}
