import fc from 'fast-check';

/**
 * Arbitraries for the request property tests: header values, query strings, paths and bodies that a
 * real client could put on the wire. Everything here produces what a server can actually receive:
 * light-my-request passes header values through untouched, so values are reduced to the bytes an HTTP
 * parser accepts (HTAB, SP, VCHAR, obs-text) and trimmed as the parser would trim them.
 */

/** Text as a server sees it after an HTTP/1.1 parser: UTF-8 bytes read as latin1, no controls, trimmed. */
export function asHeaderValue(text: string): string {
  const latin1 = Buffer.from(text, 'utf8').toString('latin1');
  return latin1.replace(/[^\t\x20-\x7e\x80-\xff]/g, '').replace(/^[\t ]+|[\t ]+$/g, '');
}

/** Short, long, empty, ASCII, unicode and binary-ish text. */
export const anyText: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.string({ maxLength: 40 }), weight: 4 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 30 }), weight: 2 },
  { arbitrary: fc.constantFrom('', ' ', '\t', 'null', 'undefined', '0', '-1', 'true', '[]', '{}', '%00', '\u0000', 'é', '🙂', '\u202e', 'ไทย'), weight: 2 },
  { arbitrary: fc.integer({ min: 200, max: 3000 }).map((length) => 'x'.repeat(length)), weight: 1 },
);

/** A header value as received by the server (possibly empty). */
export const headerValue: fc.Arbitrary<string> = anyText.map(asHeaderValue);

const TOKEN_CHARS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-';

/** A string of the key/token alphabet ([A-Za-z0-9_-]). */
export function tokenText(minLength: number, maxLength: number): fc.Arbitrary<string> {
  return fc.string({ unit: fc.constantFrom(...TOKEN_CHARS), minLength, maxLength });
}

export const hexText = (length: number): fc.Arbitrary<string> =>
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });

/** Percent-encodes every UTF-8 byte, in upper or lower case hex. */
export function percentEncodeAll(text: string, lower = false): string {
  return [...Buffer.from(text, 'utf8')].map((byte) => `%${byte.toString(16).padStart(2, '0')[lower ? 'toLowerCase' : 'toUpperCase']()}`).join('');
}

export type Encoding = 'component' | 'all' | 'all_lower' | 'plus';

export const encoding: fc.Arbitrary<Encoding> = fc.constantFrom<Encoding>('component', 'component', 'all', 'all_lower', 'plus');

export function encodeQueryText(text: string, how: Encoding): string {
  switch (how) {
    case 'component':
      return encodeURIComponent(text);
    case 'all':
      return percentEncodeAll(text);
    case 'all_lower':
      return percentEncodeAll(text, true);
    case 'plus':
      return encodeURIComponent(text).replace(/%20/g, '+');
  }
}

/** Raw (not re-encoded) fragments that end up in a query string as sent. */
export const queryJunk: fc.Arbitrary<string> = fc.constantFrom(
  '', '%', '%zz', '%E0%A4%A', '=', '==', 'a=b=c', ';', '%00', '%F0%9F%98%80', '+', '%2B', '&', '%26=%3D', '%C0%80', '%ED%A0%80',
);

/** Raw (not re-encoded) path segments, some of them malformed. */
export const pathJunk: fc.Arbitrary<string> = fc.constantFrom(
  '%', '%zz', '%E0%A4%A', '%00', '%2F', '%2e%2e', '..', '.', '%C0%AF', '%ED%A0%80', '%F0%9F%98%80', '~', ':id', '*', '%3F', '%23',
);

/** JSON text with incidental whitespace and an optional byte-order mark. */
export function jsonText(value: unknown, spacing: 0 | 1 | 2, bom: boolean): string {
  return `${bom ? '\uFEFF' : ''}${JSON.stringify(value, null, spacing === 0 ? undefined : spacing)}`;
}

/** JSON texts that parse but carry prototype-pollution keys (which must be refused as malformed). */
export const pollutedJson: fc.Arbitrary<string> = fc.constantFrom(
  '{"__proto__":{"admin":true},"amount_minor":1,"note":"a"}',
  '{"amount_minor":1,"note":"a","nested":{"__proto__":{"x":1}}}',
  '{"constructor":{"prototype":{"x":1}},"amount_minor":1,"note":"a"}',
  '{"amount_minor":1,"note":"a","\\u005f_proto__":{}}',
  '[{"__proto__":null}]',
  '{"a":[{"constructor":{"prototype":null}}]}',
);

/** Number literals as written in JSON text, valid or not for a positive integer of minor units. */
export const numberLiteral: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: 1, max: 2 ** 31 }).map(String),
  fc.constantFrom(
    '0', '-0', '-1', '1.0', '1.5', '1e2', '1E2', '1e-2', '1e400', '-1e400', '9007199254740991', '9007199254740992', '9007199254740993',
    '123456789012345678901234567890', '0.1', '2.00000000000000000001', '"5"', 'null', 'true', '[1]', '{"value":1}', '""',
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((value) => JSON.stringify(value)),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
);
