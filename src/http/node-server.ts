import http from 'node:http';
import type { Socket } from 'node:net';
import { newId } from '../platform/ids.ts';
import type { Logger } from '../platform/logger.ts';
import { clientErrorResponse } from './client-errors.ts';

/**
 * The Node HTTP server under Fastify (its `serverFactory`), with the transport's bounds set here rather
 * than left at Node's defaults (docs/reliability.md, "Connections and request bodies"):
 *
 * - `headersTimeout`: the request line and headers within this time of the connection's first byte;
 * - `requestTimeout`: the whole request, body included, within this time (the outer bound; each route's
 *   body deadline in body-reader.ts is tighter), checked every second rather than Node's 30;
 * - `keepAliveTimeout`: an idle kept-alive connection is closed after this;
 * - a cap on open connections: one over the cap is answered at once with the catalogue's 503
 *   `service_unavailable` and `Retry-After`, then closed. Node's own `maxConnections` would drop it
 *   without a word, which a client cannot tell from a network fault;
 * - `Expect: 100-continue` is not answered on arrival: the body reader sends the 100 when the route
 *   begins reading, so that the body of a request refused from its headers is never sent.
 */
export interface TransportSettings {
  headers_timeout_ms: number;
  request_timeout_ms: number;
  keep_alive_timeout_ms: number;
  max_connections: number;
}

/** How long a refused connection may stay open for its answer to be read before it is destroyed. */
const REFUSED_CONNECTION_LINGER_MS = 1_000;
/** The wait a client is told after its connection was refused for the cap. */
const CONNECTION_CAP_RETRY_AFTER_SECONDS = 1;

export interface TransportObserver {
  connectionRefused(): void;
  connectionsOpen(count: number): void;
}

export function createNodeServer(settings: TransportSettings, logger: Logger, observer: TransportObserver, handler: http.RequestListener): http.Server {
  const server = http.createServer(
    {
      headersTimeout: settings.headers_timeout_ms,
      requestTimeout: settings.request_timeout_ms,
      keepAliveTimeout: settings.keep_alive_timeout_ms,
      connectionsCheckingInterval: 1_000,
    },
    handler,
  );
  // With a listener, Node leaves the 100 Continue to the application (body-reader.ts, allowBody).
  server.on('checkContinue', (request: http.IncomingMessage, response: http.ServerResponse) => server.emit('request', request, response));
  capConnections(server, settings.max_connections, logger, observer);
  return server;
}

/**
 * Puts the cap in front of Node's own connection handling: the HTTP server's `connection` listeners
 * are taken off and called only for a connection under the cap. A refused socket gets the raw answer,
 * its input is discarded, and it is destroyed once the answer is out or after a short linger.
 */
function capConnections(server: http.Server, max_connections: number, logger: Logger, observer: TransportObserver): void {
  const handlers = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  let open = 0;
  server.on('connection', (socket: Socket) => {
    if (open >= max_connections) {
      refuseConnection(socket, logger);
      observer.connectionRefused();
      return;
    }
    open += 1;
    observer.connectionsOpen(open);
    socket.once('close', () => {
      open -= 1;
      observer.connectionsOpen(open);
    });
    for (const handle of handlers) handle.call(server, socket);
  });
}

function refuseConnection(socket: Socket, logger: Logger): void {
  const request_id = newId('request');
  // A raw socket's error with no listener would be an uncaught exception: the process would stop.
  socket.on('error', () => undefined);
  socket.resume();
  const linger = setTimeout(() => socket.destroy(), REFUSED_CONNECTION_LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
  socket.end(
    clientErrorResponse('service_unavailable', request_id, {
      retry_after_seconds: CONNECTION_CAP_RETRY_AFTER_SECONDS,
      details: { reason: 'connection_limit' },
    }),
  );
  logger.warn({ request_id, reason: 'connection_limit' }, 'connection refused: the process holds as many connections as it may');
}
