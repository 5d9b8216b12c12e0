import pg from 'pg';

/**
 * The hot statements of bench/growth.ts: every statement the measured operations send (captured with its
 * first parameters at the driver, under the service's Database), EXPLAINed on the grown database with
 * those parameters, as a generic plan (what a named prepared statement runs after its fifth execution)
 * and as a custom plan; a plan with a sequential scan of a table is flagged.
 */

export interface CapturedStatement {
  operation: string;
  text: string;
  values: unknown[];
}

/** The bench's own statements (polling for deliveries) start with this comment and are not the service's. */
export const BENCH_STATEMENT = '/* bench */';
/** The meters' statements (bench/meters.ts reads the backends' pids and the WAL position) are not the service's either. */
const METER_STATEMENT = /pg_stat_activity|pg_current_wal_lsn/;

const captured = new Map<string, CapturedStatement>();
let capturing: string | null = null;
let installed = false;

type QueryConfigLike = { text?: string; values?: unknown[] };

/** Wraps pg.Client#query once: while an operation is named, the first parameters of each statement text are kept. */
export function installCapture(): void {
  if (installed) return;
  installed = true;
  const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function capture(this: pg.Client, ...args: unknown[]) {
    if (capturing !== null) {
      const first = args[0] as string | QueryConfigLike;
      const text = typeof first === 'string' ? first : first?.text;
      const values = typeof first === 'string' ? (args[1] as unknown[] | undefined) : first?.values;
      if (typeof text === 'string' && !text.startsWith(BENCH_STATEMENT) && !METER_STATEMENT.test(text) && !captured.has(text)) captured.set(text, { operation: capturing, text, values: values ?? [] });
    }
    return original.apply(this, args);
  } as typeof pg.Client.prototype.query;
}

export function captureAs(operation: string | null): void {
  capturing = operation;
}

export function capturedStatements(): CapturedStatement[] {
  return [...captured.values()];
}

/** Statements that have a plan: not transaction control, not SET, one statement each. */
function explainable(text: string): boolean {
  const head = text.trim().split(/\s+/)[0]?.toUpperCase() ?? '';
  if (!['SELECT', 'WITH', 'INSERT', 'UPDATE', 'DELETE'].includes(head)) return false;
  return !/;\s*\S/.test(text.trim().replace(/;\s*$/, ''));
}

/** A parameter's text as node-postgres sends it: dates in ISO form, arrays as array literals, objects as JSON. */
function textOf(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  if (Buffer.isBuffer(value)) return `\\x${value.toString('hex')}`;
  if (Array.isArray(value)) return `{${value.map((item) => (item === null ? 'NULL' : `"${textOf(item).replace(/(["\\])/g, '\\$1')}"`)).join(',')}}`;
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function literal(client: pg.Client, value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  return client.escapeLiteral(textOf(value));
}

export interface ExplainedStatement {
  operation: string;
  statement: string;
  generic_plan: string;
  custom_plan: string;
  /** Tables scanned sequentially in either plan. */
  sequential: string[];
  /** Of those, the ones still scanned sequentially with enable_seqscan off: no index can serve the statement. */
  without_index: string[];
  /** Rows of each table scanned sequentially (pg_class.reltuples after ANALYZE), on the grown and on the empty database. */
  table_rows: Record<string, number>;
  empty_rows: Record<string, number>;
  error: string | null;
}

/** A sequential scan of a table of at most this many rows is the planner's cheapest plan, not a missing index. */
export const SMALL_TABLE_ROWS = 10_000;

/**
 * Whether a statement's plan is flagged: a sequential scan of a large table, or of a table that grows with
 * the traffic (more rows in the grown database than in the empty one) that no index could replace. A
 * reference table that does not grow (the bank directory) is read whole by design.
 */
export function flagged(statement: ExplainedStatement): string[] {
  return statement.sequential.filter(
    (table) =>
      (statement.table_rows[table] ?? 0) > SMALL_TABLE_ROWS ||
      (statement.without_index.includes(table) && (statement.table_rows[table] ?? 0) > (statement.empty_rows[table] ?? 0)),
  );
}

async function rowsOf(client: pg.Client, table: string): Promise<number> {
  const { rows } = await client.query<{ rows: number }>(`SELECT greatest(reltuples, 0)::float8 AS rows FROM pg_class WHERE oid = to_regclass($1)`, [table]);
  return Number(rows[0]?.rows ?? 0);
}

async function planOf(client: pg.Client, mode: 'force_generic_plan' | 'force_custom_plan', statement: CapturedStatement, seqscan = true): Promise<string> {
  await client.query('BEGIN');
  try {
    await client.query(`SET LOCAL plan_cache_mode = ${mode}`);
    if (!seqscan) await client.query('SET LOCAL enable_seqscan = off');
    await client.query(`PREPARE growth_explain AS ${statement.text}`);
    const args = statement.values.length > 0 ? `(${statement.values.map((value) => literal(client, value)).join(', ')})` : '';
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE growth_explain${args}`);
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  } finally {
    await client.query('ROLLBACK');
    await client.query('DEALLOCATE ALL');
  }
}

function scannedTables(plans: string): string[] {
  return [...new Set([...plans.matchAll(/Seq Scan on (\w+)/g)].map((match) => match[1] as string))];
}

export async function explainAll(databaseUrl: string, emptyUrl: string, statements: CapturedStatement[]): Promise<ExplainedStatement[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const emptyClient = new pg.Client({ connectionString: emptyUrl });
  await emptyClient.connect();
  const explained: ExplainedStatement[] = [];
  try {
    for (const statement of statements.filter((candidate) => explainable(candidate.text))) {
      const short = statement.text.replace(/\s+/g, ' ').trim();
      try {
        const generic = await planOf(client, 'force_generic_plan', statement);
        const custom = await planOf(client, 'force_custom_plan', statement);
        const sequential = scannedTables(`${generic}\n${custom}`);
        const without_index = sequential.length === 0 ? [] : scannedTables(await planOf(client, 'force_generic_plan', statement, false));
        const table_rows: Record<string, number> = {};
        const empty_rows: Record<string, number> = {};
        for (const table of sequential) {
          table_rows[table] = await rowsOf(client, table);
          empty_rows[table] = await rowsOf(emptyClient, table);
        }
        explained.push({ operation: statement.operation, statement: short, generic_plan: generic, custom_plan: custom, sequential, without_index, table_rows, empty_rows, error: null });
      } catch (error) {
        explained.push({ operation: statement.operation, statement: short, generic_plan: '', custom_plan: '', sequential: [], without_index: [], table_rows: {}, empty_rows: {}, error: error instanceof Error ? error.message : String(error) });
      }
    }
  } finally {
    await client.end();
    await emptyClient.end();
  }
  return explained;
}
