import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../platform/errors.ts';
import type { ApiRoute } from '../http/server.ts';
import type { RouteModule } from '../http/context.ts';
import { buildOpenApiDocument, openApiDocumentSchema, type OpenApiDocument } from './document.ts';

/**
 * GET /openapi.json: the OpenAPI 3.1 document of this service, generated from its route catalogue
 * (public, cacheable, through the public pipeline like every API answer). GET /docs: a rendered reference
 * (Swagger UI from the npm package `swagger-ui-dist`, served from node_modules by this service: no CDN),
 * registered on the Fastify instance itself like the checkout pages, because it answers HTML and files.
 */

const DOCUMENT_CACHE_CONTROL = 'public, max-age=300';

/** The document route. `catalogue` is read on the first request, when every module has registered its routes. */
export function openApiRoutes(catalogue: () => readonly ApiRoute[], services: { publicBaseUrl(): string }): RouteModule {
  return (registrar) => {
    let document: OpenApiDocument | null = null;
    registrar.public({
      method: 'GET',
      url: '/openapi.json',
      summary: 'This OpenAPI 3.1 document',
      responses: { 200: { description: 'The OpenAPI document, generated from the routes themselves.', schema: openApiDocumentSchema, cache_control: DOCUMENT_CACHE_CONTROL } },
      async handler() {
        document ??= buildOpenApiDocument(catalogue());
        return { status: 200, body: { ...document, servers: [{ url: services.publicBaseUrl() }] }, headers: { 'Cache-Control': DOCUMENT_CACHE_CONTROL } };
      },
    });
  };
}

/**
 * The reference page allows nothing but its own origin: its scripts and styles are files of this
 * service (no inline script), it loads /openapi.json from the same origin, and it may be framed by no one.
 * Swagger UI's icons are data: URIs. "Try it out" is switched off: merchant requests need an HMAC
 * signature that a browser page must never be given the secret for.
 */
export const DOCS_CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Payment Transfer Service API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/docs.js"></script>
</body>
</html>
`;

/** Starts Swagger UI on the page (a file, so that the policy needs no inline script). */
const INITIALIZER = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    validatorUrl: null,
    supportedSubmitMethods: [],
    defaultModelsExpandDepth: 0,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout'
  });
});
`;

interface Asset {
  content_type: string;
  bytes: () => Buffer;
}

function packageFile(name: string): () => Buffer {
  let bytes: Buffer | null = null;
  // Read on first use: the bundle is 1.7 MB that a service which never serves /docs does not need in memory.
  return () => (bytes ??= fs.readFileSync(createRequire(import.meta.url).resolve(`swagger-ui-dist/${name}`)));
}

const ASSETS: ReadonlyMap<string, Asset> = new Map([
  ['swagger-ui.css', { content_type: 'text/css; charset=utf-8', bytes: packageFile('swagger-ui.css') }],
  ['swagger-ui-bundle.js', { content_type: 'text/javascript; charset=utf-8', bytes: packageFile('swagger-ui-bundle.js') }],
  ['favicon-32x32.png', { content_type: 'image/png', bytes: packageFile('favicon-32x32.png') }],
  ['docs.js', { content_type: 'text/javascript; charset=utf-8', bytes: () => Buffer.from(INITIALIZER, 'utf8') }],
]);

export function registerApiReference(app: FastifyInstance): void {
  void app.register(
    async (scope) => {
      // The page's security headers on every answer under /docs, errors included.
      scope.addHook('onSend', async (_request, reply, payload) => {
        reply.header('Content-Security-Policy', DOCS_CONTENT_SECURITY_POLICY);
        reply.header('X-Frame-Options', 'DENY');
        reply.header('Referrer-Policy', 'no-referrer');
        reply.header('X-Content-Type-Options', 'nosniff');
        reply.header('Cross-Origin-Opener-Policy', 'same-origin');
        reply.header('Cross-Origin-Resource-Policy', 'same-origin');
        reply.header('Permissions-Policy', 'geolocation=(), microphone=(), camera=(), payment=(), usb=()');
        if (!reply.hasHeader('Cache-Control')) reply.header('Cache-Control', 'no-cache');
        return payload;
      });

      scope.get('', async (_request, reply) => reply.code(200).header('content-type', 'text/html; charset=utf-8').send(PAGE));

      scope.get<{ Params: { name: string } }>('/assets/:name', async (request, reply) => {
        const asset = ASSETS.get(request.params.name);
        if (!asset) throw new ApiError('resource_not_found');
        return reply.code(200).header('content-type', asset.content_type).header('Cache-Control', 'public, max-age=3600').send(asset.bytes());
      });
    },
    { prefix: '/docs' },
  );
}
