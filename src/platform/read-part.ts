import { invariant } from './assert.ts';
import type { Queryable } from './db.ts';
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
 * A read that a command plans before the statement that carries it (TigerBeetle's prefetch phase is the
 * model): the command builds it from what it knows, hands its `part` to a statement of its own or of
 * another module (the receipt's lock, the matching queue's candidates, the feed locks), and later asks the
 * object it holds what was answered (`take`), instead of a statement of its own. The carrying statement
 * parses its answer with `part.parse`, as it parses every part it carries; that parse is what records the
 * answer here. Nothing is kept in the transaction: the answer lives in this object, which the command holds
 * in a variable and passes, typed, to whichever step needs it. A command whose read was not carried (the
 * statement found no row, or another door ran the step) finds nothing and reads as it always did.
 */
export class PlannedRead<Value> {
  #answer: { value: Value } | null = null;
  /** The read as a statement carries it; its `parse` records the answer in this object. */
  readonly part: ReadPart<Value>;

  constructor(read: ReadPart<Value>) {
    this.part = {
      sql: read.sql,
      params: read.params,
      parse: (raw) => {
        const value = read.parse(raw);
        this.#answer = { value };
        return value;
      },
    };
  }

  /**
   * What the carrying statement answered, once: a second step that needs the read again reads it anew, as
   * the answer may be stale by then. `found: false` when no statement carried it.
   */
  take(): { found: true; value: Value } | { found: false } {
    const answer = this.#answer;
    if (answer === null) return { found: false };
    this.#answer = null;
    return { found: true, value: answer.value };
  }
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

/** The answers of a tuple of reads, each as its part parses it. */
export type AnswersOf<Parts extends readonly ReadPart<unknown>[]> = { -readonly [Index in keyof Parts]: Parts[Index] extends ReadPart<infer Value> ? Value : never };

/**
 * A write command whose first reads are planned before its transaction begins (TigerBeetle's prefetch phase is
 * the model): `reads` ride on the transaction's first statement (the idempotency key's, src/idempotency/), and
 * `run` is handed what they answered, parsed, in their order. The plan is built by the service that runs the
 * command, from the request alone, and what it read travels as `run`'s argument: nothing is kept in the
 * transaction for a later step to find.
 */
export interface PlannedCommand<Outcome> {
  reads: readonly ReadPart<unknown>[];
  run(tx: Queryable, answers: readonly unknown[]): Promise<Outcome>;
}

/** A planned command whose `run` gets its reads' answers with their types (see `PlannedCommand`). */
export function planCommand<const Parts extends readonly ReadPart<unknown>[], Outcome>(reads: Parts, run: (tx: Queryable, answers: AnswersOf<Parts>) => Promise<Outcome>): PlannedCommand<Outcome> {
  return {
    reads,
    run: (tx, answers) => {
      invariant(answers.length === reads.length, 'a planned command gets one answer for each of its reads');
      // The answers are what these parts parsed, in their order: the tuple type says so.
      return run(tx, answers as AnswersOf<Parts>);
    },
  };
}

/** The same command, its outcome turned into another (a route's answer, say). */
export function mapPlannedCommand<Outcome, Mapped>(command: PlannedCommand<Outcome>, map: (outcome: Outcome) => Mapped): PlannedCommand<Mapped> {
  return { reads: command.reads, run: async (tx, answers) => map(await command.run(tx, answers)) };
}
