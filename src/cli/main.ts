import { scrubText } from '../platform/logger.ts';
import { runCli } from './commands.ts';

/**
 * `npm run cli -- <group> <action> [options]`: the admin CLI. All work happens in `runCli`, which
 * reports failures itself and answers the exit code; this file only connects it to the process.
 */
const FORCED_EXIT_AFTER_MS = 5_000;

// A reader that closes the pipe early (`| head`) must not turn into an EPIPE stack trace.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
});

runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env }).then(
  (exitCode) => {
    process.exitCode = exitCode;
    // Everything the CLI opened is closed by now, so the process ends on its own; this unreferenced
    // timer only ends it anyway if some library left a handle open, instead of hanging the terminal.
    setTimeout(() => process.exit(exitCode), FORCED_EXIT_AFTER_MS).unref();
  },
  (error: unknown) => {
    // runCli catches everything it expects; this is the last guard, and it still prints no stack.
    process.stderr.write(`error: unexpected_error: ${scrubText(error instanceof Error ? error.message : String(error))}\n`);
    process.exitCode = 1;
  },
);
