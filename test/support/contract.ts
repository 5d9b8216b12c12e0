import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { apiRoutesOf } from '../../src/http/server.ts';
import { buildOpenApiDocument, openApiPath, type JsonSchema, type OpenApiDocument } from '../../src/openapi/document.ts';

/**
 * The contract check of the OpenAPI document: every answer that goes through a test app is validated
 * against the document generated from that app's own routes, for its route and status — its body, its
 * media type and the headers the document says it always carries. Errors too: an error answer must use
 * a status the route documents, with a code the document lists for that status. Answers of routes outside
 * the document (hosted checkout pages, /docs, test-only routes, unknown paths) are checked only when they are
 * JSON errors, against the shared error schema; the operations endpoints answer `{status}` and are not checked.
 *
 * A mismatch does not change the answer (the test goes on as it would); it is collected, printed, and
 * fails the test file when its app closes (`assertClean`), so the whole suite's traffic is the evidence.
 * With CONTRACT_RECORD_DIR set, each app also appends what it checked to a file there (coverage).
 */

// ajv-formats is CommonJS: its default export arrives as the module object under NodeNext.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv2020) => Ajv2020;

const DOCUMENT_ID = 'https://contract.test/openapi.json';

/** The operations endpoints answer `{status}` by design (src/ops/routes.ts): outside the API and its error body. */
const OPERATIONS_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

export interface ContractViolation {
  method: string;
  route: string;
  status: number;
  request_id: string;
  problem: string;
}

export interface ContractRecorder {
  violations: ContractViolation[];
  /** Answers checked against an operation of the document, by `METHOD path status`. */
  checked: Map<string, number>;
  /** Answers outside the document (checked as error bodies only, or not at all). */
  outside: number;
  assertClean(): void;
}

export function createContractRecorder(): ContractRecorder {
  const recorder: ContractRecorder = {
    violations: [],
    checked: new Map(),
    outside: 0,
    assertClean() {
      recordCoverage(recorder);
      if (recorder.violations.length === 0) return;
      const lines = recorder.violations.map((item) => `- ${item.method} ${item.route} -> ${item.status} (${item.request_id}): ${item.problem}`);
      recorder.violations = [];
      throw new Error(`responses disagree with the OpenAPI document (test/support/contract.ts):\n${lines.join('\n')}`);
    },
  };
  return recorder;
}

function recordCoverage(recorder: ContractRecorder): void {
  const directory = process.env.CONTRACT_RECORD_DIR;
  if (!directory || (recorder.checked.size === 0 && recorder.violations.length === 0)) return;
  fs.mkdirSync(directory, { recursive: true });
  const line = JSON.stringify({
    file: process.env.VITEST_TEST_FILE ?? null,
    checked: Object.fromEntries(recorder.checked),
    outside: recorder.outside,
    violations: recorder.violations,
  });
  fs.appendFileSync(path.join(directory, `contract-${process.pid}.jsonl`), `${line}\n`);
}

/** Compiles the document's schemas once per document and validates answers against them. */
export class ContractValidator {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(readonly document: OpenApiDocument) {
    this.ajv = new Ajv2020({ allErrors: true, strict: false });
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: DOCUMENT_ID, components: document.components });
  }

  private validator(key: string, schema: JsonSchema): ValidateFunction {
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.ajv.compile(pointAtDocument(schema) as JsonSchema);
      this.compiled.set(key, validate);
    }
    return validate;
  }

  private header(reference: JsonSchema): JsonSchema & { required?: boolean } {
    const name = typeof reference.$ref === 'string' ? reference.$ref.replace('#/components/headers/', '') : null;
    return name === null ? reference : (this.document.components.headers[name] ?? {});
  }

  /**
   * The problems of one answer (empty when it agrees with the document), or null when the document has
   * no operation for its route and it is not an error body.
   */
  check(answer: { method: string; route: string | undefined; status: number; headers: Record<string, unknown>; body: Buffer | string | null }): string[] | null {
    const contentType = String(answer.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    const operation = answer.route === undefined ? undefined : this.document.paths[openApiPath(answer.route)]?.[answer.method.toLowerCase()];
    if (!operation) {
      if (answer.status < 400 || contentType !== 'application/json' || (answer.route !== undefined && OPERATIONS_ROUTES.has(answer.route))) return null;
      return this.validateBody('error', { $ref: '#/components/schemas/error' }, answer.body);
    }
    const response = operation.responses[String(answer.status)];
    if (!response) return [`status ${answer.status} is not documented for this operation${errorCodeNote(answer)}`];
    const problems: string[] = [];
    for (const [name, reference] of Object.entries(response.headers ?? {})) {
      const header = this.header(reference);
      const value = answer.headers[name.toLowerCase()];
      if (header.required && value === undefined) problems.push(`header ${name} is missing`);
      const expected = (header.schema as { const?: string } | undefined)?.const;
      if (expected !== undefined && value !== undefined && String(value) !== expected) problems.push(`header ${name} is "${String(value)}", the document says "${expected}"`);
    }
    const content = response.content ?? {};
    const json = content['application/json'];
    if (json) {
      if (contentType !== 'application/json') problems.push(`content-type ${contentType || '(none)'} where the document says application/json`);
      else problems.push(...this.validateBody(`${operation.operationId} ${answer.status}`, json.schema, answer.body));
    } else if (Object.keys(content).length > 0) {
      if (!Object.keys(content).includes(contentType)) problems.push(`content-type ${contentType || '(none)'} is not one of ${Object.keys(content).join(', ')}`);
    } else if (answer.body !== null && answer.body.length > 0) {
      problems.push('a body where the document says none');
    }
    return problems;
  }

  private validateBody(key: string, schema: JsonSchema, body: Buffer | string | null): string[] {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body === null ? '' : body.toString());
    } catch {
      return ['the body is not JSON'];
    }
    const validate = this.validator(key, schema);
    if (validate(parsed)) return [];
    const errors = (validate.errors ?? []).slice(0, 8).map((error) => `${error.instancePath || '(root)'} ${error.message ?? ''}${error.params && 'additionalProperty' in error.params ? ` (${String(error.params.additionalProperty)})` : ''}${error.params && 'allowedValues' in error.params ? ` ${JSON.stringify(error.params.allowedValues)}` : ''}`);
    const text = typeof body === 'string' ? body : (body?.toString() ?? '');
    return [`body does not match the schema: ${errors.join('; ')} — body: ${text.slice(0, 400)}`];
  }
}

function errorCodeNote(answer: { body: Buffer | string | null }): string {
  try {
    const code = (JSON.parse(String(answer.body)) as { error?: { code?: string } }).error?.code;
    return code ? ` (error code ${code})` : '';
  } catch {
    return '';
  }
}

/** Points the document's own references (`#/components/…`) at the schema that holds its components. */
function pointAtDocument(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(pointAtDocument);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, key === '$ref' && typeof item === 'string' && item.startsWith('#/components/') ? `${DOCUMENT_ID}${item}` : pointAtDocument(item)]),
  );
}

/** Validates every answer of `app` (call before `ready()`); the document is made from the app's routes on first use. */
export function attachContractCheck(app: FastifyInstance, recorder: ContractRecorder): void {
  let validator: ContractValidator | null = null;
  app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (request.method === 'HEAD' || request.method === 'OPTIONS') return payload;
    validator ??= new ContractValidator(buildOpenApiDocument(apiRoutesOf(app)));
    const body = typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : null;
    const route = request.routeOptions.url;
    const status = reply.statusCode;
    const problems = validator.check({ method: request.method, route, status, headers: reply.getHeaders(), body });
    if (problems === null) {
      recorder.outside += 1;
      return payload;
    }
    const key = `${request.method} ${route === undefined ? '(unmatched)' : openApiPath(route)} ${status}`;
    recorder.checked.set(key, (recorder.checked.get(key) ?? 0) + 1);
    for (const problem of problems) {
      const violation = { method: request.method, route: route ?? request.url.split('?')[0] ?? '', status, request_id: String(request.id), problem };
      recorder.violations.push(violation);
      process.stderr.write(`[contract] ${violation.method} ${violation.route} -> ${status}: ${problem}\n`);
    }
    return payload;
  });
}
