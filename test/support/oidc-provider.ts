import http from 'node:http';
import type net from 'node:net';
import Provider from 'oidc-provider';

/**
 * A real OpenID Connect provider for tests: `oidc-provider` on a real port of this machine, with its development
 * sign-in pages (any login name is accepted and becomes the subject, `sub`), one confidential client registered
 * with the console's redirect URI, authorization code with PKCE. Its issuer is http://localhost:{port}, another
 * site than the console's http://127.0.0.1:{port}, so that a browser goes through the cross-site redirects a real
 * provider makes.
 */

export interface TestOpenIdProvider {
  issuer: string;
  client_id: string;
  client_secret: string;
  close(): Promise<void>;
}

export async function startOpenIdProvider(options: { redirect_uri: string }): Promise<TestOpenIdProvider> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const issuer = `http://localhost:${port}`;
  const client_id = 'backoffice-console';
  const client_secret = 'test-console-client-secret-0123456789';
  const provider = new Provider(issuer, {
    clients: [{ client_id, client_secret, redirect_uris: [options.redirect_uri], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' }],
    pkce: { required: () => true },
    cookies: { keys: ['test-oidc-provider-cookie-key-0123456789'] },
    features: { devInteractions: { enabled: true } },
  });
  server.on('request', provider.callback());
  return {
    issuer,
    client_id,
    client_secret,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
