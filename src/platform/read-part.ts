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

/**
 * A read that a command's first statement carries for a later step of the same command (the
 * idempotency statement carries, say, the deposit creation's policy read): answered in that statement,
 * kept in the transaction under `key` (src/platform/unit-of-work.ts `keepCarried`), and taken by its
 * owner instead of a statement of its own. An owner that finds nothing kept reads as it always did.
 */
export interface CarriedRead {
  key: string;
  part: ReadPart<unknown>;
}

/**
 * A row that a read answered as JSON (`row_to_json`, `json_build_object`), with its timestamp columns
 * turned back into Dates as the driver returns them from a plain SELECT; null for JSON null.
 */
export function rowFromJson<Row>(value: unknown, date_columns: readonly (keyof Row & string)[]): Row | null {
  if (value === null || value === undefined) return null;
  const row = { ...(value as Record<string, unknown>) };
  for (const column of date_columns) {
    const text = row[column];
    if (typeof text === 'string') row[column] = new Date(text);
  }
  return row as Row;
}
