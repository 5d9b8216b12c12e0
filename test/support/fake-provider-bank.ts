import type http from 'node:http';
import { parseSlipPayload } from '../../src/verification/slip-payload.ts';
import { sendJson, startFakeSlipProvider, type FakeSlipProvider, type RecordedRequest } from './fake-slip-provider.ts';

/**
 * The state behind the fake slip-verification providers (fake-slipok.ts, fake-easyslip.ts, fake-rdcw.ts):
 * the transfers the "bank" holds, and what the provider account is going through (quota used up,
 * credentials refused, bank down, a slip too new to be published). Each fake renders this state in its
 * provider's documented answers; this file knows nothing of any provider's format.
 */

export interface FakeParty {
  bank_code: string;
  /** The account as the provider prints it (masked). */
  account: string;
  name_th: string;
  name_en: string;
}

export interface FakeTransfer {
  sending_bank_code: string;
  trans_ref: string;
  /** Baht as decimal text, the way a test states an amount exactly. */
  amount: string;
  /** The instant of the transfer, ISO 8601 in UTC. */
  occurred_at: string;
  sender: FakeParty;
  receiver: FakeParty;
}

/**
 * - `normal`: answers about the transfers it holds;
 * - `quota_exhausted` / `credentials_refused`: the account's documented refusal to every question;
 * - `bank_down`: the documented "bank temporarily unreachable" answer;
 * - `hang`: accepts the request and never answers;
 * - `malformed`: a 200 that does not follow the documentation.
 */
export type FakeMode = 'normal' | 'quota_exhausted' | 'credentials_refused' | 'bank_down' | 'hang' | 'malformed';

export interface FakeProviderBank {
  transfers: Map<string, FakeTransfer>;
  mode: FakeMode;
  /** How many more questions about a held transfer are answered "not yet published" before it is found. */
  not_yet_available: number;
  /** The trans_refs the provider has answered about: its memory of repeated slips. */
  answered: Set<string>;
  /** The receiving account registered with the provider account (SlipOK's receiver check), or null. */
  registered_receiver: string | null;
  quota: { limit: number; used: number };
}

/** A provider's answer: a status and a JSON body, or null for no answer at all. */
export type FakeAnswer = { status: number; body: unknown } | null;

export interface StatefulFakeProvider {
  url: string;
  requests: RecordedRequest[];
  bank: FakeProviderBank;
  hold(transfer: FakeTransfer): void;
  reset(): void;
  close(): Promise<void>;
}

function freshBank(): FakeProviderBank {
  return { transfers: new Map(), mode: 'normal', not_yet_available: 0, answered: new Set(), registered_receiver: null, quota: { limit: 1000, used: 0 } };
}

/** Starts a fake whose every request is answered by `respond` from the shared state. */
export async function startStatefulFake(respond: (request: RecordedRequest, bank: FakeProviderBank) => FakeAnswer): Promise<StatefulFakeProvider> {
  const server: FakeSlipProvider = await startFakeSlipProvider();
  let bank = freshBank();
  const handle = (request: RecordedRequest, response: http.ServerResponse) => {
    const answer = respond(request, bank);
    if (answer !== null) sendJson(response, answer.status, answer.body);
  };
  server.answer(handle);
  return {
    url: server.url,
    requests: server.requests,
    get bank() {
      return bank;
    },
    hold(transfer) {
      bank.transfers.set(transfer.trans_ref, transfer);
    },
    reset() {
      server.reset();
      server.answer(handle);
      bank = freshBank();
    },
    close: () => server.close(),
  };
}

export type PayloadLookup = { kind: 'invalid' } | { kind: 'unknown' } | { kind: 'not_yet' } | { kind: 'known'; transfer: FakeTransfer; repeated: boolean; payload: string };

/**
 * What the bank makes of a slip payload: not a slip, a transfer it does not hold, one it holds but has
 * not published yet (counted down), or one it holds (and whether the provider answered about it before,
 * which it then remembers).
 */
export function lookUpPayload(payload: unknown, bank: FakeProviderBank): PayloadLookup {
  const parsed = typeof payload === 'string' ? parseSlipPayload(payload) : null;
  if (parsed === null || !parsed.ok) return { kind: 'invalid' };
  const transfer = bank.transfers.get(parsed.reference.trans_ref);
  if (transfer === undefined || transfer.sending_bank_code !== parsed.reference.sending_bank_code) return { kind: 'unknown' };
  if (bank.not_yet_available > 0) {
    bank.not_yet_available -= 1;
    return { kind: 'not_yet' };
  }
  const repeated = bank.answered.has(transfer.trans_ref);
  bank.answered.add(transfer.trans_ref);
  bank.quota.used += 1;
  return { kind: 'known', transfer, repeated, payload: payload as string };
}

/** The JSON body of a request, or undefined. */
export function bodyOf(request: RecordedRequest): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(request.body);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

const BANGKOK_OFFSET_MS = 7 * 60 * 60 * 1000;

/** An instant as Bangkok date `yyyyMMdd` and time `HH:mm:ss`, the way Thai slips print it. */
export function bangkokDateAndTime(iso: string): { date: string; time: string; local_iso: string } {
  const local = new Date(new Date(iso).getTime() + BANGKOK_OFFSET_MS).toISOString();
  return { date: local.slice(0, 10).replaceAll('-', ''), time: local.slice(11, 19), local_iso: `${local.slice(0, 19)}+07:00` };
}

/** A transfer of 1,000.00 baht from Somchai at KBANK to a company at SCB, with the masks Thai banks print. */
export function sampleTransfer(fields: Partial<FakeTransfer> & Pick<FakeTransfer, 'trans_ref'>): FakeTransfer {
  return {
    sending_bank_code: '004',
    amount: '1000.00',
    occurred_at: '2026-11-23T07:05:00.000Z',
    sender: { bank_code: '004', account: 'xxx-x-x1234-x', name_th: 'นาย สมชาย ใ', name_en: 'MR. SOMCHAI J' },
    receiver: { bank_code: '014', account: 'xxx-x-x5678-x', name_th: 'บริษัท ตัวอย่าง จำกัด', name_en: 'EXAMPLE CO., LTD.' },
    ...fields,
  };
}

function bankSlipPartyOf(party: FakeParty): Record<string, unknown> {
  return { displayName: party.name_th, name: party.name_en, proxy: { type: null, value: null }, account: { type: 'BANKAC', value: party.account } };
}

/**
 * A transfer in the banks' slip-verification shape that SlipOK and RDCW pass on (`transRef`,
 * `sendingBank`, `transDate`, `sender.displayName`, `sender.account.value`, …), field for field as their
 * documentation and SDKs list them.
 */
export function bankSlipData(transfer: FakeTransfer): Record<string, unknown> {
  const { date, time } = bangkokDateAndTime(transfer.occurred_at);
  return {
    language: 'TH',
    transRef: transfer.trans_ref,
    sendingBank: transfer.sending_bank_code,
    receivingBank: transfer.receiver.bank_code,
    transDate: date,
    transTime: time,
    sender: bankSlipPartyOf(transfer.sender),
    receiver: bankSlipPartyOf(transfer.receiver),
    amount: Number(transfer.amount),
    paidLocalAmount: Number(transfer.amount),
    paidLocalCurrency: '764',
    countryCode: 'TH',
    transFeeAmount: 0,
    ref1: '',
    ref2: '',
    ref3: '',
    toMerchantId: '',
  };
}
