import type { Clock } from '../platform/clock.ts';
import type { SecretBox } from '../platform/crypto.ts';
import type { Database } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import type { TenancyService } from '../tenancy/service.ts';
import { ConsoleOidcSettings } from './oidc-settings.ts';
import { ConsoleOidcSignIn } from './oidc-sign-in.ts';
import { ConsoleSessions } from './sessions.ts';

export type { ConsoleOidcSettings, ConsoleOidcSignIn, ConsoleSessions };

/** The console's services, built together because the OpenID sign-in starts its sessions through `ConsoleSessions`. */
export function createConsoleServices(deps: {
  database: Database;
  clock: Clock;
  logger: Logger;
  secretBox: SecretBox;
  tenancy: TenancyService;
  derivation_key: Buffer;
  /** The console's origin: BACKOFFICE_BASE_URL, else the service's own. */
  origin: () => string;
}): { consoleSessions: ConsoleSessions; consoleOidcSettings: ConsoleOidcSettings; consoleOidcSignIn: ConsoleOidcSignIn } {
  const { database, clock, tenancy, derivation_key, origin } = deps;
  const consoleSessions = new ConsoleSessions({ database, clock, tenancy, derivation_key, origin });
  const consoleOidcSettings = new ConsoleOidcSettings({ database, clock, tenancy, secretBox: deps.secretBox, origin });
  const consoleOidcSignIn = new ConsoleOidcSignIn({ database, clock, logger: deps.logger, tenancy, settings: consoleOidcSettings, sessions: consoleSessions, derivation_key, origin });
  return { consoleSessions, consoleOidcSettings, consoleOidcSignIn };
}
