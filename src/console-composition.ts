import type { Services } from './app.ts';
import type { ConsolePageDependencies } from './backoffice-console/page-kit.ts';
import { CasePresence } from './backoffice-console/presence.ts';

/**
 * What the back-office console's pages are given (src/backoffice-console/): part of the composition root, kept
 * apart from app.ts so that the console's areas can grow their dependencies without app.ts passing its limit of
 * length. Each page area calls only what is named here.
 */
export function consolePageDependencies(services: Services): ConsolePageDependencies {
  return {
    sessions: services.consoleSessions,
    oidcSignIn: services.consoleOidcSignIn,
    oidcSettings: services.consoleOidcSettings,
    presence: new CasePresence({ database: services.database, clock: services.clock, tenancy: services.tenancy }),
    review: services.review,
    claims: services.claims,
    disputes: services.disputes,
    ledger: services.ledger,
    webhooks: services.webhooks.service,
    deposits: services.deposits,
    withdrawals: services.withdrawals,
    verification: services.verification,
    events: services.events,
    tenancy: services.tenancy,
    database: services.database,
    clock: services.clock,
    config: services.config,
  };
}
