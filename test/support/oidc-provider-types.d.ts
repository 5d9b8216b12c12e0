/**
 * The little of `oidc-provider` (which ships no types) the tests use: a provider built from its issuer and a
 * configuration, whose `callback()` is a Node request listener.
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export default class Provider {
    constructor(issuer: string, configuration?: Record<string, unknown>);
    callback(): (request: IncomingMessage, response: ServerResponse) => void;
  }
}
