import type { z } from 'zod';
import { ApiError, type FieldProblem } from '../platform/errors.ts';

/**
 * Maps schema failures to `validation_error.details.fields[]`. Reasons are stable snake_case words a
 * client can branch on; a schema may attach its own reason and hint through the issue's `params`
 * (`z.custom` / `.refine(..., { params: { reason, hint } })`).
 */
function reasonOf(issue: z.core.$ZodIssue): { reason: string; hint?: string } {
  const params = (issue as { params?: { reason?: string; hint?: string } }).params;
  if (params?.reason) return params.hint ? { reason: params.reason, hint: params.hint } : { reason: params.reason };
  switch (issue.code) {
    case 'invalid_type':
      if (issue.expected === 'int') return { reason: 'must_be_integer', hint: 'must_be_integer_minor_units' };
      return (issue as { input?: unknown }).input === undefined ? { reason: 'required' } : { reason: `must_be_${issue.expected}` };
    case 'too_small':
      return { reason: issue.origin === 'string' ? 'too_short' : 'too_small' };
    case 'too_big':
      return { reason: issue.origin === 'string' ? 'too_long' : 'too_large' };
    case 'invalid_format':
      return { reason: 'invalid_format' };
    case 'invalid_value':
      return { reason: 'not_allowed_value' };
    case 'unrecognized_keys':
      return { reason: 'unknown_field' };
    case 'invalid_union':
      return { reason: 'invalid_value' };
    default:
      return { reason: 'invalid_value' };
  }
}

export function problemsOf(error: z.ZodError): FieldProblem[] {
  const problems: FieldProblem[] = [];
  for (const issue of error.issues.slice(0, 50)) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) problems.push({ path: [...issue.path, key].join('.'), reason: 'unknown_field' });
      continue;
    }
    problems.push({ path: issue.path.map(String).join('.') || '$', ...reasonOf(issue) });
  }
  return problems;
}

export function parseOrThrow<Schema extends z.ZodType>(schema: Schema, input: unknown): z.infer<Schema> {
  // reportInput lets `reasonOf` tell a missing field (`required`) from a wrong-typed one.
  const result = schema.safeParse(input, { reportInput: true });
  if (!result.success) throw new ApiError('validation_error', { details: { fields: problemsOf(result.error) } });
  return result.data;
}

/**
 * PostgreSQL text cannot hold U+0000, and a lone UTF-16 surrogate cannot be encoded as UTF-8, so
 * such text can never be stored or match anything stored: it is refused at the edge.
 */
export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed();
}

const MAX_BODY_DEPTH = 32;
const MAX_BODY_NODES = 10_000;

/** Paths of decoded JSON whose keys or strings are not storable text (bounded walk). */
export function unstorableTextPaths(value: unknown): FieldProblem[] {
  const problems: FieldProblem[] = [];
  let visited = 0;
  const walk = (node: unknown, path: string[], depth: number): void => {
    visited += 1;
    if (visited > MAX_BODY_NODES || problems.length >= 20) return;
    if (depth > MAX_BODY_DEPTH) {
      problems.push({ path: path.join('.') || '$', reason: 'too_deeply_nested' });
      return;
    }
    if (typeof node === 'string') {
      if (!isStorableText(node)) problems.push({ path: path.join('.') || '$', reason: 'invalid_characters' });
      return;
    }
    if (Array.isArray(node)) {
      node.forEach((item, index) => walk(item, [...path, String(index)], depth + 1));
      return;
    }
    if (node !== null && typeof node === 'object') {
      for (const [key, item] of Object.entries(node)) {
        if (!isStorableText(key)) {
          problems.push({ path: [...path, '(key)'].join('.'), reason: 'invalid_characters' });
          continue;
        }
        walk(item, [...path, key], depth + 1);
      }
    }
  };
  walk(value, [], 0);
  return problems;
}
