import pino from 'pino';

/**
 * Structured JSON logs. Secrets never reach a log: known header and field paths are removed by pino's
 * redaction, and `scrubText` masks anything that looks like an API key, signing secret, back-office
 * token, capability token or long digit run (account numbers) in free text such as error messages.
 */
export const REDACTED_PATHS = [
  'api_key',
  'signing_secret',
  'token',
  'secret',
  'password',
  'account_number',
  'qr_payload',
  'operator_token',
  'req.headers.authorization',
  'req.headers["pg-signature"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["pg-signature"]',
  '*.api_key',
  '*.signing_secret',
  '*.token',
  '*.secret',
  '*.password',
  '*.account_number',
  '*.qr_payload',
  '*.operator_token',
  'body',
  'req.body',
];

const SECRET_PATTERNS: RegExp[] = [
  /\bsk_(?:test|live)_[A-Za-z0-9_-]+/g,
  /\bsig_(?:test|live)_[A-Za-z0-9_-]+/g,
  /\bbo_[A-Za-z0-9_-]{16,}/g,
  /\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/g,
  // The secret segment of a hosted checkout link (src/checkout/links.ts) and a checkout session cookie's value.
  /\bcs_[A-Za-z0-9_-]{20,}/g,
  // The back-office console's one-time sign-in link token and its session cookie's value (src/backoffice-console/).
  /\bbo[lk]_[A-Za-z0-9_-]{20,}/g,
  /\bv1\.mch_[0-9A-Za-z]+\.[tl]\.[0-9]+\.[A-Za-z0-9_-]{20,}/g,
  /\b\d{6,}\b/g,
];

export function scrubText(text: string): string {
  let scrubbed = text;
  for (const pattern of SECRET_PATTERNS) scrubbed = scrubbed.replace(pattern, '[redacted]');
  return scrubbed;
}

export type Logger = pino.Logger;

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'payment-service' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      formatters: {
        level: (label) => ({ level: label }),
      },
      hooks: {
        // Free-text messages are scrubbed too, because an error message can quote input.
        logMethod(args, method) {
          const scrubbed = args.map((argument) => (typeof argument === 'string' ? scrubText(argument) : argument));
          return method.apply(this, scrubbed as Parameters<typeof method>);
        },
      },
      serializers: {
        err: (error: Error) => ({
          type: error?.name,
          message: scrubText(String(error?.message ?? '')),
          stack: error?.stack ? scrubText(error.stack) : undefined,
        }),
      },
    },
    destination,
  );
}
