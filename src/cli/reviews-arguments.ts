import { REJECTION_CODES } from '../review/catalogue.ts';
import { helpRows } from './help-rows.ts';

/**
 * The arguments of `npm run cli -- reviews <action>`: each action's options, the help texts made from
 * them, and the checks of the values given. The commands themselves are in reviews.ts.
 */

export const PROGRAM = 'npm run cli -- reviews';

export const PAGE_SIZE_MAX = 100;
/** `--all` stops after this many pages (5,000 reviews at the largest page), so a runaway cursor cannot loop forever. */
export const MAX_PAGES = 50;
/** Deposit, brand and receipt ids: checked so that a typo is a usage error and a server answer cannot name a path outside the image directory. */
export const IDENTIFIER_PATTERN = /^[A-Za-z0-9_-]{1,100}$/;
/** The same rule as the queue route's `reason` filter. */
const REASON_PATTERN = /^[A-Z][A-Z_]{1,63}$/;

export type ActionName = 'list' | 'show' | 'approve' | 'reject' | 'escalate';
export type DecisionAction = 'approve' | 'reject' | 'escalate';

interface OptionSpec {
  type: 'string' | 'boolean';
  /** What the value looks like in help; absent for flags. */
  placeholder?: string;
  description: string;
  required?: boolean;
}

export interface ActionSpec {
  action: ActionName;
  summary: string;
  takes_deposit: boolean;
  options: Readonly<Record<string, OptionSpec>>;
}

const brandOption: OptionSpec = { type: 'string', placeholder: 'wl_…', description: 'the brand to read (required with the platform administrator credential)' };
const noteOption = (required: boolean): OptionSpec => ({
  type: 'string',
  placeholder: 'text',
  description: 'why, in at least 20 characters; kept internal, never shown to the merchant',
  required,
});

export const ACTIONS: readonly ActionSpec[] = [
  {
    action: 'list',
    summary: 'The review queue, oldest first.',
    takes_deposit: false,
    options: {
      mode: { type: 'string', placeholder: 'test|live', description: 'only test or only live orders' },
      reason: { type: 'string', placeholder: 'CODE', description: 'only orders in review for this reason, such as SENDER_NAME_MISMATCH' },
      escalated: { type: 'boolean', description: 'only escalated reviews' },
      limit: { type: 'string', placeholder: '1..100', description: 'reviews per page (20 by default, 100 with --all)' },
      all: { type: 'boolean', description: `follow the pages to the end of the queue (at most ${MAX_PAGES} pages)` },
      brand: brandOption,
    },
  },
  {
    action: 'show',
    summary: 'One order in review: status, amounts, reasons, verification, slips, approvals, evidence, decisions.',
    takes_deposit: true,
    options: {
      'save-images': { type: 'string', placeholder: 'directory', description: 'download each slip image into this directory (files <receipt_id>.<ext>, mode 0600)' },
      brand: brandOption,
    },
  },
  {
    action: 'approve',
    summary: 'Approve: settles the order, or records the first of two approvals when four eyes applies.',
    takes_deposit: true,
    options: {
      'amount-minor': { type: 'string', placeholder: 'satang', description: 'the amount you verified, when the bank verified none (the bank’s figure otherwise)' },
      note: { ...noteOption(false), description: 'an optional note; when given, at least 20 characters' },
    },
  },
  {
    action: 'reject',
    summary: 'Reject: the order ends rejected, with the chosen code’s texts for the end user.',
    takes_deposit: true,
    options: {
      code: { type: 'string', placeholder: 'CODE', description: `one of ${REJECTION_CODES.join(', ')}`, required: true },
      note: noteOption(true),
    },
  },
  {
    action: 'escalate',
    summary: 'Escalate: the order stays in review, marked escalated (its version moves).',
    takes_deposit: true,
    options: { note: noteOption(true) },
  },
];

export const COMMON_OPTIONS: Readonly<Record<string, OptionSpec>> = {
  'token-file': { type: 'string', placeholder: 'path', description: 'read the back-office token from this file instead of PG_REVIEWER_TOKEN' },
  json: { type: 'boolean', description: 'print JSON (list: one review per line); errors go to stderr as {"error":{…}}' },
  help: { type: 'boolean', description: 'show help' },
};

/** Every option of every action, so that one strict parse can find the action and refuse unknown options. */
export function parserOptions(): Record<string, { type: 'string' | 'boolean'; short?: string }> {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {};
  for (const [name, option] of Object.entries(COMMON_OPTIONS)) options[name] = { type: option.type };
  for (const spec of ACTIONS) for (const [name, option] of Object.entries(spec.options)) options[name] = { type: option.type };
  options.help = { type: 'boolean', short: 'h' };
  return options;
}

export class UsageError extends Error {
  constructor(
    message: string,
    readonly action: ActionName | null,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

// Help

function optionLabel(name: string, option: OptionSpec): string {
  return option.placeholder === undefined ? `--${name}` : `--${name} <${option.placeholder}>`;
}

export function actionUsage(spec: ActionSpec): string {
  const parts = Object.entries(spec.options).map(([name, option]) => (option.required ? optionLabel(name, option) : `[${optionLabel(name, option)}]`));
  return [PROGRAM, spec.action, ...(spec.takes_deposit ? ['<deposit_id>'] : []), ...parts, '[--token-file <path>]', '[--json]'].join(' ');
}

const CREDENTIALS_HELP = [
  'Credentials: the service address is PG_BASE_URL, else base_url in DATA_DIR/operator-credentials.json.',
  'The token is your own reviewer credential: PG_REVIEWER_TOKEN, or --token-file <path> (a file holding',
  'only the token, readable by you alone). A token is never taken on the command line. list and show also',
  'accept the operator credential (PG_OPERATOR_TOKEN or the operator credentials file); the platform',
  'administrator then names the brand with --brand wl_…. Decisions need a reviewer credential.',
];

export function groupHelp(): string {
  return [
    `Usage: ${PROGRAM} <action> [<deposit_id>] [options]`,
    '',
    'The review desk for reviewers, over the running service’s back-office API.',
    '',
    'Actions:',
    ...helpRows(ACTIONS.map((spec) => [spec.action, spec.summary] as const)),
    '',
    ...CREDENTIALS_HELP,
    '',
    `Run '${PROGRAM} <action> --help' for the options of one action. Exit codes: 0 done, 1 failed or refused, 2 usage.`,
    '',
  ].join('\n');
}

export function actionHelp(spec: ActionSpec): string {
  const rows = [...Object.entries(spec.options), ...Object.entries(COMMON_OPTIONS)].map(
    ([name, option]) => [optionLabel(name, option), `${option.description}${option.required ? ' (required)' : ''}`] as const,
  );
  return [`Usage: ${actionUsage(spec)}`, '', spec.summary, '', 'Options:', ...helpRows(rows), '', ...CREDENTIALS_HELP, ''].join('\n');
}

// Checks of the values

export type Values = Readonly<Record<string, string | undefined>>;

export function validate(spec: ActionSpec, values: Values): void {
  for (const [name, option] of Object.entries(spec.options)) {
    if (option.required && values[name] === undefined) throw new UsageError(`missing required option ${optionLabel(name, option)}`, spec.action);
  }
  for (const [name, value] of Object.entries(values)) {
    if (value !== undefined && value.trim().length === 0 && name !== 'note') throw new UsageError(`option --${name} needs a value`, spec.action);
  }
  if (values.mode !== undefined && values.mode !== 'test' && values.mode !== 'live') throw new UsageError('--mode must be test or live', spec.action);
  if (values.reason !== undefined && !REASON_PATTERN.test(values.reason)) throw new UsageError('--reason must be a review reason code such as SENDER_NAME_MISMATCH', spec.action);
  if (values.limit !== undefined && (!/^[0-9]{1,3}$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > PAGE_SIZE_MAX)) {
    throw new UsageError(`--limit must be a whole number from 1 to ${PAGE_SIZE_MAX}`, spec.action);
  }
  if (values.brand !== undefined && !IDENTIFIER_PATTERN.test(values.brand)) throw new UsageError('--brand must be a brand id (wl_…)', spec.action);
  const amount = values['amount-minor'];
  if (amount !== undefined && (!/^[0-9]{1,15}$/.test(amount) || Number(amount) < 1 || !Number.isSafeInteger(Number(amount)))) {
    throw new UsageError('--amount-minor must be a positive whole number of satang', spec.action);
  }
  if (values.code !== undefined && !(REJECTION_CODES as readonly string[]).includes(values.code)) {
    throw new UsageError(`--code must be one of ${REJECTION_CODES.join(', ')}`, spec.action);
  }
}
