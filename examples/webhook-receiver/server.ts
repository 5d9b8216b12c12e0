import fs from 'node:fs';
import { fetchKeysFrom, ReferenceReceiver, SigningKeyCache, startReceiverServer } from './receiver.ts';

/**
 * Runs the reference receiver:
 *
 *   SIGNING_KEYS_URL=https://pay.example/v1/webhooks/signing-keys LIVEMODE=false PORT=8443 \
 *   TLS_KEY=key.pem TLS_CERT=cert.pem npx tsx examples/webhook-receiver/server.ts
 *
 * Without TLS_KEY and TLS_CERT it serves plain HTTP, which the service sends to only for a sandbox
 * endpoint on loopback: in the embedded development mode (PGlite, NODE_ENV not production), or when its
 * operator set WEBHOOK_SANDBOX_LOOPBACK=true. `npm run cli -- listen --forward-to …` reaches it too.
 */
const signingKeysUrl = process.env.SIGNING_KEYS_URL ?? 'http://localhost:8080/v1/webhooks/signing-keys';
const livemode = process.env.LIVEMODE === 'true';
const keyPath = process.env.TLS_KEY;
const certPath = process.env.TLS_CERT;

const receiver = new ReferenceReceiver({ livemode, keys: new SigningKeyCache(fetchKeysFrom(signingKeysUrl), () => Date.now()) });
const started = await startReceiverServer({
  receiver,
  port: Number(process.env.PORT ?? 0),
  host: process.env.HOST ?? '127.0.0.1',
  ...(keyPath && certPath ? { tls: { key: fs.readFileSync(keyPath, 'utf8'), cert: fs.readFileSync(certPath, 'utf8') } } : {}),
});
process.stdout.write(`reference receiver (${livemode ? 'live' : 'sandbox'}) listening at ${started.url}\n`);
