import type { Socket } from 'node:net';
import { STATUS_CODES } from 'node:http';
import { ApiError, renderError, type ErrorCode } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import type { Logger } from '../platform/logger.ts';

/**
 * Requests that Node's HTTP parser refuses before any route or hook sees them: a request line that is
 * not HTTP, raw (unencoded) bytes above ASCII in the target, both `Content-Length` and
 * `Transfer-Encoding`, headers past the size limit, a request that does not arrive in time. They get
 * the one error body of every other refusal, with a `Request-Id`, written straight to the socket (there
 * is no request object to answer through), and the connection is closed: after a framing error the
 * next request on it cannot be found reliably, so keeping it would invite request smuggling.
 *
 * No rate bucket counts these (nothing about the caller has been parsed), so the rate headers that every
 * other answer carries are absent here; the log line names the request id and the parser's code only,
 * never the bytes received.
 */

/** The catalogue code for a parser error code of Node (llhttp's `HPE_*`, or Node's own). */
export function clientErrorCode(parserCode: string | undefined): ErrorCode {
  switch (parserCode) {
    case 'HPE_HEADER_OVERFLOW':
      return 'request_headers_too_large';
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return 'request_timeout';
    default:
      return 'malformed_request';
  }
}

/**
 * The raw HTTP/1.1 answer to a request that no route will see (the parser refused it, or the connection
 * was over the process's cap), closing the connection. A known wait goes in `Retry-After` too.
 */
export function clientErrorResponse(code: ErrorCode, request_id: string, options: { retry_after_seconds?: number; details?: Record<string, unknown> } = {}): string {
  const error = new ApiError(code, { retry_after_seconds: options.retry_after_seconds ?? null, details: options.details ?? {} });
  const body = JSON.stringify(renderError(error, request_id));
  return [
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `Request-Id: ${request_id}`,
    ...(options.retry_after_seconds === undefined ? [] : [`Retry-After: ${options.retry_after_seconds}`]),
    'Cache-Control: no-store',
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

export function createClientErrorHandler(logger: Logger): (error: Error & { code?: string }, socket: Socket) => void {
  return (error, socket) => {
    // A reset connection, or one already gone, has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const code = clientErrorCode(error.code);
    const request_id = newId('request');
    logger.info({ request_id, status: new ApiError(code).status, code, parser_code: error.code ?? null }, 'request refused by the HTTP parser');
    if (socket.writable) socket.end(clientErrorResponse(code, request_id));
    else socket.destroy();
  };
}
