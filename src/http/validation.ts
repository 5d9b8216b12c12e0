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
  const result = schema.safeParse(input);
  if (!result.success) throw new ApiError('validation_error', { details: { fields: problemsOf(result.error) } });
  return result.data;
}
