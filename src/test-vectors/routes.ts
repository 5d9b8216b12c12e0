import type { RouteRegistrar } from '../http/context.ts';
import { testVectorDocument } from './vectors.ts';

/** GET /v1/webhooks/test-vectors: no authentication; a constant document for offline checks. */
export function registerTestVectorRoutes(registrar: RouteRegistrar): void {
  registrar.public({
    method: 'GET',
    url: '/v1/webhooks/test-vectors',
    async handler() {
      return { status: 200, body: testVectorDocument() };
    },
  });
}
