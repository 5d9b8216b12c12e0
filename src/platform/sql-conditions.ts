/**
 * The WHERE clause of a statement that names only the filters that are set, so that each shape of a search is
 * planned with its own values and takes the index that fits it (a catch-all statement's generic plan can only use
 * what every call shares). Each condition is written with the `$n` its value takes among the parameters.
 */
export class SqlConditions {
  private readonly conditions: string[];
  readonly params: unknown[];

  constructor(fixed: { conditions: readonly string[]; params: readonly unknown[] }) {
    this.conditions = [...fixed.conditions];
    this.params = [...fixed.params];
  }

  /** Adds `condition` with `value` as its parameter, when `value` is set (not null). */
  addIfSet(value: unknown, condition: (position: number) => string): void {
    if (value === null || value === undefined) return;
    this.params.push(value);
    this.conditions.push(condition(this.params.length));
  }

  /** Adds a condition over several values (a keyset cursor's), given the position of the first. */
  addValues(values: readonly unknown[], condition: (first: number) => string): void {
    const first = this.params.length + 1;
    this.params.push(...values);
    this.conditions.push(condition(first));
  }

  /** Appends a parameter that is not a condition (the LIMIT) and answers its position. */
  parameter(value: unknown): number {
    this.params.push(value);
    return this.params.length;
  }

  where(): string {
    return this.conditions.join(' AND ');
  }
}

/** The filters an order search of a brand shares between deposits and withdrawals (columns of both tables). */
export interface OrderSearchFilters {
  merchant_reference: string | null;
  end_user_ref: string | null;
  status: string | null;
  livemode: boolean | null;
  /** Inclusive lower bound on `created_at`. */
  created_from: Date | null;
  /** Exclusive upper bound on `created_at`. */
  created_to: Date | null;
}

/** Adds the shared filters of an order search that are set. */
export function addOrderSearchFilters(where: SqlConditions, filters: OrderSearchFilters): void {
  where.addIfSet(filters.merchant_reference, (at) => `merchant_reference = $${at}::text`);
  where.addIfSet(filters.end_user_ref, (at) => `end_user_ref = $${at}::text`);
  where.addIfSet(filters.status, (at) => `status = $${at}::text`);
  where.addIfSet(filters.livemode, (at) => `livemode = $${at}::boolean`);
  where.addIfSet(filters.created_from, (at) => `created_at >= $${at}::timestamptz`);
  where.addIfSet(filters.created_to, (at) => `created_at < $${at}::timestamptz`);
}
