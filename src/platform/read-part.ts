/**
 * A read that one module owns and another module's statement carries: a scalar subquery (in
 * parentheses, answering one JSON value or NULL) with its own $1…$n placeholders and values. The
 * carrying statement renumbers the placeholders after its own, so that a request's admission can read,
 * say, the sandbox's attached test clock in the same round trip without the tenancy module knowing
 * the test clocks' table.
 */
export interface ReadPart<Value> {
  sql: string;
  params: readonly unknown[];
  /** Turns the JSON value the subquery answered (null when it found nothing) into the owner's type. */
  parse(value: unknown): Value;
}

/** The SQL with every $n placeholder moved up by `offset`. */
export function renumberPlaceholders(sql: string, offset: number): string {
  return sql.replace(/\$([0-9]+)/g, (_, number: string) => `$${Number(number) + offset}`);
}
