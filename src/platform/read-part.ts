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

/**
 * Renumbered texts by SQL text and offset. The texts are the repositories' statements and the offsets
 * follow from a command's shape, so the same few pairs recur on every command; the regular-expression
 * replacement they would otherwise cost was about 2.5 % of the service's CPU per deposit creation
 * (docs/benchmarks.md). Bounded like the prepared statement names (src/platform/db.ts): past the limit
 * a text is simply renumbered again.
 */
const renumberedTexts = new Map<string, Map<number, string>>();
const RENUMBERED_TEXT_CACHE_LIMIT = 5000;
let renumberedTextCount = 0;

/** The SQL with every $n placeholder moved up by `offset`. */
export function renumberPlaceholders(sql: string, offset: number): string {
  if (offset === 0) return sql;
  const byOffset = renumberedTexts.get(sql);
  const known = byOffset?.get(offset);
  if (known !== undefined) return known;
  const renumbered = sql.replace(/\$([0-9]+)/g, (_, number: string) => `$${Number(number) + offset}`);
  if (renumberedTextCount < RENUMBERED_TEXT_CACHE_LIMIT) {
    renumberedTextCount += 1;
    if (byOffset) byOffset.set(offset, renumbered);
    else renumberedTexts.set(sql, new Map([[offset, renumbered]]));
  }
  return renumbered;
}

/**
 * The parts' SQL texts, each renumbered after the parameters already in `params`, whose values are appended
 * to `params` in the same order: how a statement carries reads of other modules after its own placeholders.
 */
export function appendParts(parts: readonly ReadPart<unknown>[], params: unknown[]): string[] {
  return parts.map((part) => {
    const sql = renumberPlaceholders(part.sql, params.length);
    params.push(...part.params);
    return sql;
  });
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
