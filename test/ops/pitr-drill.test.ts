import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { usingPostgres } from '../support/database.ts';

/**
 * The point-in-time recovery drill of docs/operations.md ("Backups and point-in-time recovery") run as an
 * operator runs it: `scripts/ops/pitr-drill.sh` archives WAL from a private cluster, takes a base backup,
 * writes through the service, restores to a time between two batches of deposits and starts the service on
 * the restored cluster. It runs in the PostgreSQL pass only (it needs the server binaries, not the embedded
 * engine), so that a change to the schema, the start or the backup procedure that breaks a restore is found.
 */
const run = promisify(execFile);
const serverBinariesPresent = fs.existsSync('/usr/lib/postgresql') && fs.readdirSync('/usr/lib/postgresql').some((major) => fs.existsSync(`/usr/lib/postgresql/${major}/bin/initdb`));

describe.skipIf(!usingPostgres || !serverBinariesPresent)('point-in-time recovery drill', () => {
  it('restores a base backup and the archived WAL to the target time: the earlier deposits exist, the later ones do not', async () => {
    const { stdout } = await run('scripts/ops/pitr-drill.sh', [], { timeout: 240_000, maxBuffer: 16 * 1024 * 1024 });
    expect(stdout).toMatch(/recovery target: .+, between 5 deposits kept and 5 deposits lost/);
    expect(stdout).toContain('after the restore: 5 of 5 kept deposits found, 0 of 5 lost deposits found');
    expect(stdout).toContain('PASS: restored to the target time exactly');
  }, 300_000);
});
