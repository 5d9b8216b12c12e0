import type { TextSink } from './backends.ts';

/**
 * A usage error as every CLI command answers it, on stderr: with --json one line
 * `{"error":{"code":"usage_error","message":…}}`, else `error: <text>` and where to read the usage. `text` is
 * written as given: a caller whose messages may quote what was typed scrubs them first.
 */
export function writeUsageError(stderr: TextSink, program: string, text: string, json: boolean): void {
  stderr.write(json ? `${JSON.stringify({ error: { code: 'usage_error', message: text } })}\n` : `error: ${text}\nRun '${program} --help' for usage.\n`);
}
