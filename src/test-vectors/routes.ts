import type { RouteRegistrar } from '../http/context.ts';
import { testVectorDocument } from './vectors.ts';
import { testVectorDocumentSchema } from './resources.ts';

/** GET /v1/webhooks/test-vectors: no authentication; a constant document for offline checks. */
export function registerTestVectorRoutes(registrar: RouteRegistrar): void {
  registrar.public({
    method: 'GET',
    url: '/v1/webhooks/test-vectors',
    summary: 'Webhook and request-signing test vectors',
    responses: { 200: { description: 'The offline test vectors.', schema: testVectorDocumentSchema } },
    async handler() {
      return { status: 200, body: testVectorDocument() };
    },
  });
}
