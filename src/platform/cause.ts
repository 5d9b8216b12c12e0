/**
 * The API versions this service speaks, and what a write records as its cause: the request (when there
 * was one), its Idempotency-Key and its pinned version. Events carry the cause in their envelope; the HTTP
 * layer makes it for each request. Both sit above this file.
 */
export const CURRENT_API_VERSION = '2026-08-01';
export const SUPPORTED_API_VERSIONS: readonly string[] = [CURRENT_API_VERSION];

/** What caused a change: the API request (when there was one) and its pinned version. */
export interface EventCause {
  request_id: string | null;
  idempotency_key: string | null;
  api_version: string;
}

/** The cause of a change no request made (a job, a deadline). */
export const SYSTEM_CAUSE: EventCause = { request_id: null, idempotency_key: null, api_version: CURRENT_API_VERSION };
