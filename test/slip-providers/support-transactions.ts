import type { Database } from '../../src/platform/db.ts';

/**
 * Counts the transactions open on a database and records, at every outgoing `fetch` (a provider call), how many
 * were open: a provider must never be asked with a transaction open. `restore` undoes both wrappers.
 */
export function watchTransactionsAtFetch(database: Database): { openAtFetch: number[]; restore: () => void } {
  let open = 0;
  const openAtFetch: number[] = [];
  const transaction = database.transaction.bind(database);
  const originalFetch = globalThis.fetch;
  database.transaction = async (work) => {
    open += 1;
    try {
      return await transaction(work);
    } finally {
      open -= 1;
    }
  };
  globalThis.fetch = (input, init) => {
    openAtFetch.push(open);
    return originalFetch(input, init);
  };
  return {
    openAtFetch,
    restore() {
      database.transaction = transaction;
      globalThis.fetch = originalFetch;
    },
  };
}
