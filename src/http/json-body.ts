import secureJsonParse from 'secure-json-parse';
import { ApiError } from '../platform/errors.ts';
import { duplicateKeyProblems } from './json-duplicate-keys.ts';

/**
 * JSON request bodies, the same way on every route (merchant, back office, slip capability): the media
 * type is `application/json` with no charset or UTF-8 (JSON is UTF-8, RFC 8259; another charset is
 * refused as `unsupported_media_type` rather than read wrongly), the bytes must be valid UTF-8 (an
 * invalid sequence is `malformed_json`, never silently replaced by U+FFFD), prototype keys are refused,
 * and so is an object that names one key twice (`validation_error` with `reason: 'duplicate_key'`).
 */

const UTF8 = new TextDecoder('utf-8', { fatal: true });

export function isJsonMediaType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const [mediaType, ...parameters] = contentType.split(';');
  if (mediaType?.trim().toLowerCase() !== 'application/json') return false;
  for (const parameter of parameters) {
    const [name, value] = parameter.split('=').map((part) => part.trim());
    if (name?.toLowerCase() !== 'charset') continue;
    if ((value ?? '').replace(/^"(.*)"$/, '$1').toLowerCase() !== 'utf-8') return false;
  }
  return true;
}

export function decodeJson(raw: Buffer): unknown {
  let text: string;
  try {
    text = UTF8.decode(raw);
  } catch {
    throw new ApiError('malformed_json', { details: { reason: 'invalid_utf8' } });
  }
  let value: unknown;
  try {
    value = secureJsonParse.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' });
  } catch {
    throw new ApiError('malformed_json');
  }
  // The scan comes after the parse, so that a text which is not JSON is `malformed_json` whatever it
  // repeats, and so that the scan may trust the grammar. A number, string or literal holds no key.
  if (value === null || typeof value !== 'object') return value;
  const problems = duplicateKeyProblems(text);
  if (problems.length > 0) throw new ApiError('validation_error', { details: { fields: problems } });
  return value;
}
