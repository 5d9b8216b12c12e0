import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { TransferLookup, TransferQuery, VerifiedTransfer } from '../../src/verification/bank-port.ts';
import { accountsMatch, namesCompatible } from '../../src/verification/checks.ts';
import { buildSlipPayload } from '../../src/verification/slip-payload.ts';
import type { ProviderAlert, ResilienceOptions } from '../../src/verification/provider-http.ts';
import type { ProviderVerifier } from '../../src/verification/provider-verifier.ts';
import { sampleTransfer, type FakeTransfer, type StatefulFakeProvider } from './fake-provider-bank.ts';
import { sendJson, startFakeSlipProvider, type FakeSlipProvider } from './fake-slip-provider.ts';

/**
 * The contract every provider adapter keeps against its fake (test/verification/<provider>-adapter.test.ts
 * calls this with what its provider answers): the amount maps exactly whatever the order expected, a
 * wrong receiver and a repeated slip still come back as found, "no such transfer" only from the
 * provider's words, the slip-too-new answer then found, quota and credentials as BANK_DISABLED with an
 * operator alert, timeouts, malformed answers, the circuit breaker, the masks the provider prints, and
 * the test-connection route. Timeouts are 150 ms per attempt and backoffs 10 ms, so a file runs in seconds.
 */

export type VerifierOptions = Partial<ResilienceOptions> & { url?: string; on_alert?: (alert: ProviderAlert) => void };

export interface MaskingForm {
  label: string;
  /** The account as the provider prints it, and the full account it is compared with. */
  printed_account: string;
  actual_account: string;
  account_matches: boolean;
  /** The names as the provider prints them, and the declared Thai and English names. */
  printed_name_th: string;
  printed_name_en: string;
  declared_th: string;
  declared_en: string | null;
  name_matches: boolean;
}

export interface ProviderContract {
  provider: ProviderAlert['provider'];
  start(): Promise<StatefulFakeProvider>;
  /** A verifier with the fake's credentials. */
  verifier(url: string, options?: VerifierOptions): ProviderVerifier;
  /** A verifier whose credentials the fake refuses. */
  wrongCredentials(url: string, options?: VerifierOptions): ProviderVerifier;
  /** What each documented answer becomes. */
  outcomes: { unknown_transfer: TransferLookup; not_yet_available: TransferLookup; bank_down: TransferLookup };
  masking: MaskingForm[];
}

/** The deadline of the tests that make the fake hang: short, so that the file runs in seconds. */
export const CONTRACT_TIMEOUT_MS = 150;
/**
 * The deadline of every other test: long enough that a loaded machine (CI runs the suite on two cores) never turns an
 * answer into a timeout and a retry, which would change the requests a test counts.
 */
export const ANSWER_TIMEOUT_MS = 5_000;
export const TRANS_REF = '016327070500AQR04523';
export const QUERY: TransferQuery = { white_label_id: 'wl_01', livemode: true, sending_bank_code: '004', trans_ref: TRANS_REF };

/** The transfer the adapters must return for `sampleTransfer` (separators gone, names mapped, satang). */
export const SAMPLE_VERIFIED: VerifiedTransfer = {
  sending_bank_code: '004',
  trans_ref: TRANS_REF,
  amount_minor: 100_000,
  occurred_at: new Date('2026-11-23T07:05:00.000Z'),
  sender: { bank_code: '004', account_number: 'xxxxx1234x', name_th: 'นาย สมชาย ใ', name_en: 'MR. SOMCHAI J' },
  receiver: { bank_code: '014', account_number: 'xxxxx5678x', name_th: 'บริษัท ตัวอย่าง จำกัด', name_en: 'EXAMPLE CO., LTD.' },
};

const QUOTA_ALERT = { outcome: 'bank_disabled', operator_alert: 'quota_exhausted' };
const CREDENTIALS_ALERT = { outcome: 'bank_disabled', operator_alert: 'credentials_refused' };

export function describeProviderContract(contract: ProviderContract, extra: (fake: () => StatefulFakeProvider) => void): void {
  let fake: StatefulFakeProvider;
  beforeAll(async () => {
    fake = await contract.start();
  });
  afterAll(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.reset();
  });
  const subject = (options: VerifierOptions = {}) => contract.verifier(fake.url, { timeout_ms: ANSWER_TIMEOUT_MS, retry_base_ms: 10, ...options });
  const hold = (fields: Partial<FakeTransfer> = {}) => fake.hold(sampleTransfer({ trans_ref: TRANS_REF, ...fields }));

  describeAmounts(() => fake, subject, hold);
  describeVerdicts(contract, () => fake, subject, hold);
  describeAccountTrouble(contract, () => fake, subject, hold);
  describeTransportTrouble(() => fake, subject, hold);
  describeMasking(contract, () => fake, subject, hold);
  describeConnectionTest(contract, () => fake, subject);
  extra(() => fake);
}

type Subject = (options?: VerifierOptions) => ProviderVerifier;
type Hold = (fields?: Partial<FakeTransfer>) => void;

function describeAmounts(fake: () => StatefulFakeProvider, subject: Subject, hold: Hold): void {
  describe('amounts: the transfer comes back as the bank moved it (exact, short or over is the pipeline\'s business)', () => {
    it('exact: the whole transfer, with satang, the time, banks, masked accounts without separators and names', async () => {
      hold();
      expect(await subject().verifyTransfer(QUERY)).toEqual({ outcome: 'found', transfer: SAMPLE_VERIFIED });
      expect(fake().requests).toHaveLength(1);
    });

    it.each([
      ['short', '999.99', 99_999],
      ['over', '1000.01', 100_001],
      ['one satang', '0.01', 1],
      ['ten satang', '0.1', 10],
      ['whole baht', '25000', 2_500_000],
      ['half baht', '12345.5', 1_234_550],
    ])('%s: %s baht is %d satang exactly', async (_label, amount, satang) => {
      hold({ amount });
      const lookup = await subject().verifyTransfer(QUERY);
      expect(lookup).toMatchObject({ outcome: 'found', transfer: { amount_minor: satang } });
    });
  });
}

function describeVerdicts(contract: ProviderContract, fake: () => StatefulFakeProvider, subject: Subject, hold: Hold): void {
  describe('verdicts', () => {
    it('wrong receiver: found, with the receiver the bank reports', async () => {
      const receiver = { bank_code: '002', account: 'xxx-x-x9999-x', name_th: 'นาย อื่น ค', name_en: 'MR. OTHER K' };
      hold({ receiver });
      fake().bank.registered_receiver = 'xxx-x-x5678-x';
      const lookup = await subject().verifyTransfer(QUERY);
      expect(lookup).toEqual({ outcome: 'found', transfer: { ...SAMPLE_VERIFIED, receiver: { bank_code: '002', account_number: 'xxxxx9999x', name_th: 'นาย อื่น ค', name_en: 'MR. OTHER K' } } });
    });

    it('provider duplicate: a repeated slip is still found, every time', async () => {
      hold();
      const verifier = subject();
      expect(await verifier.verifyTransfer(QUERY)).toEqual({ outcome: 'found', transfer: SAMPLE_VERIFIED });
      expect(await verifier.verifyTransfer(QUERY)).toEqual({ outcome: 'found', transfer: SAMPLE_VERIFIED });
      expect(fake().requests).toHaveLength(2);
    });

    it('not found: the documented answer about a transfer the bank does not have', async () => {
      hold({ trans_ref: 'SOMETHINGELSE0001' });
      expect(await subject().verifyTransfer(QUERY)).toEqual(contract.outcomes.unknown_transfer);
    });

    it('not yet available, then found', async () => {
      hold();
      fake().bank.not_yet_available = 1;
      const verifier = subject({ max_attempts: 1 });
      expect(await verifier.verifyTransfer(QUERY)).toEqual(contract.outcomes.not_yet_available);
      expect(await verifier.verifyTransfer(QUERY)).toEqual({ outcome: 'found', transfer: SAMPLE_VERIFIED });
    });

    it('an answer about another transfer is malformed, never found', async () => {
      fake().bank.transfers.set(TRANS_REF, sampleTransfer({ trans_ref: `${TRANS_REF}X` }));
      expect(await subject().verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'malformed_response' });
    });
  });
}

function describeAccountTrouble(contract: ProviderContract, fake: () => StatefulFakeProvider, subject: Subject, hold: Hold): void {
  describe('the provider account: BANK_DISABLED with an operator alert', () => {
    it('quota exhausted', async () => {
      hold();
      fake().bank.mode = 'quota_exhausted';
      const alerts: ProviderAlert[] = [];
      expect(await subject({ on_alert: (alert) => alerts.push(alert) }).verifyTransfer(QUERY)).toEqual(QUOTA_ALERT);
      expect(alerts).toEqual([{ provider: contract.provider, reason: 'quota_exhausted' }]);
      expect(fake().requests).toHaveLength(1);
    });

    it('credentials refused', async () => {
      hold();
      const alerts: ProviderAlert[] = [];
      const verifier = contract.wrongCredentials(fake().url, { timeout_ms: ANSWER_TIMEOUT_MS, on_alert: (alert) => alerts.push(alert) });
      expect(await verifier.verifyTransfer(QUERY)).toEqual(CREDENTIALS_ALERT);
      expect(alerts).toEqual([{ provider: contract.provider, reason: 'credentials_refused' }]);
      fake().bank.mode = 'credentials_refused';
      expect(await subject().verifyTransfer(QUERY)).toEqual(CREDENTIALS_ALERT);
    });

    it('nothing is logged, and no outcome or alert carries the reference or the QR payload', async () => {
      const spies = (['log', 'info', 'warn', 'error', 'debug'] as const).map((method) => vi.spyOn(console, method));
      try {
        const alerts: ProviderAlert[] = [];
        const seen: unknown[] = [alerts];
        for (const mode of ['quota_exhausted', 'credentials_refused', 'bank_down', 'malformed', 'hang'] as const) {
          fake().bank.mode = mode;
          seen.push(await subject({ max_attempts: 1, timeout_ms: CONTRACT_TIMEOUT_MS, on_alert: (alert) => alerts.push(alert) }).verifyTransfer(QUERY));
        }
        const text = JSON.stringify(seen);
        expect(text).not.toContain(TRANS_REF);
        expect(text).not.toContain(buildSlipPayload({ sending_bank_code: QUERY.sending_bank_code, trans_ref: TRANS_REF }));
        for (const spy of spies) expect(spy).not.toHaveBeenCalled();
      } finally {
        for (const spy of spies) spy.mockRestore();
      }
    });

    it('an alert callback that throws changes nothing', async () => {
      fake().bank.mode = 'quota_exhausted';
      const throwing = () => {
        throw new Error('alerting is down');
      };
      expect(await subject({ on_alert: throwing }).verifyTransfer(QUERY)).toEqual(QUOTA_ALERT);
    });

    it('bank down: unavailable, retried by the pipeline within its bounded wait', async () => {
      hold();
      fake().bank.mode = 'bank_down';
      expect(await subject({ max_attempts: 1 }).verifyTransfer(QUERY)).toEqual(contract.outcomes.bank_down);
    });
  });
}

function describeTransportTrouble(fake: () => StatefulFakeProvider, subject: Subject, hold: Hold): void {
  describe('transport', () => {
    it('timeout: every attempt is given up at the deadline and its connection closed', async () => {
      hold();
      fake().bank.mode = 'hang';
      expect(await subject({ max_attempts: 2, timeout_ms: CONTRACT_TIMEOUT_MS }).verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'timeout' });
      expect(fake().requests).toHaveLength(2);
      await vi.waitFor(() => expect(fake().requests.every((request) => request.closed_early)).toBe(true));
    });

    it('malformed answer: unavailable, not retried', async () => {
      hold();
      fake().bank.mode = 'malformed';
      expect(await subject().verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'malformed_response' });
      expect(fake().requests).toHaveLength(1);
    });

    it('the circuit breaker opens per adapter instance, answers without the network and raises an alert', async () => {
      fake().bank.mode = 'hang';
      const alerts: ProviderAlert[] = [];
      const verifier = subject({ max_attempts: 1, timeout_ms: CONTRACT_TIMEOUT_MS, breaker_threshold: 2, on_alert: (alert) => alerts.push(alert) });
      await verifier.verifyTransfer(QUERY);
      await verifier.verifyTransfer(QUERY);
      expect(await verifier.verifyTransfer(QUERY)).toEqual({ outcome: 'unavailable', reason: 'circuit_open' });
      expect(fake().requests).toHaveLength(2);
      expect(alerts.map((alert) => alert.reason)).toEqual(['circuit_open']);
      fake().bank.mode = 'normal';
      hold();
      expect((await subject().verifyTransfer(QUERY)).outcome).toBe('found');
    });
  });
}

function describeMasking(contract: ProviderContract, fake: () => StatefulFakeProvider, subject: Subject, hold: Hold): void {
  describe('masks as the provider prints them go through the mask-aware comparison', () => {
    it.each(contract.masking.map((form) => [form.label, form] as const))('%s', async (_label, form) => {
      hold({ sender: { bank_code: '004', account: form.printed_account, name_th: form.printed_name_th, name_en: form.printed_name_en } });
      const lookup = await subject().verifyTransfer(QUERY);
      expect(lookup.outcome).toBe('found');
      if (lookup.outcome !== 'found') return;
      const sender = lookup.transfer.sender;
      expect(accountsMatch(sender.account_number, form.actual_account)).toBe(form.account_matches);
      expect(namesCompatible(sender.name_th, form.declared_th) || namesCompatible(sender.name_en, form.declared_en)).toBe(form.name_matches);
    });
  });
}

function describeConnectionTest(contract: ProviderContract, fake: () => StatefulFakeProvider, subject: Subject): void {
  describe('testConnection', () => {
    it('answers the remaining quota', async () => {
      fake().bank.quota = { limit: 500, used: 120 };
      expect(await subject().testConnection()).toEqual({ ok: true, remaining_quota: 380 });
      expect(fake().bank.quota.used).toBe(120);
    });

    it('names refused credentials and raises the alert', async () => {
      const alerts: ProviderAlert[] = [];
      expect(await contract.wrongCredentials(fake().url, { timeout_ms: ANSWER_TIMEOUT_MS, on_alert: (alert) => alerts.push(alert) }).testConnection()).toEqual({
        ok: false,
        reason: 'credentials_refused',
      });
      expect(alerts).toEqual([{ provider: contract.provider, reason: 'credentials_refused' }]);
    });

    it('says unreachable when nothing answers in time', async () => {
      fake().bank.mode = 'hang';
      expect(await subject({ timeout_ms: CONTRACT_TIMEOUT_MS }).testConnection()).toEqual({ ok: false, reason: 'unreachable' });
      expect(fake().requests).toHaveLength(1);
    });
  });
}

/** One scripted answer (status and JSON body, or text) and the outcome it must give. */
export type ScriptedCase = [label: string, status: number, body: unknown, expected: TransferLookup];

/**
 * Each documented answer, written out as the documentation shows it, against the outcome it maps to; the
 * answers come from a plain scripted server rather than the stateful fake, so that every code is covered.
 */
export function describeScriptedAnswers(makeVerifier: (url: string) => ProviderVerifier, cases: ScriptedCase[]): void {
  describe('every documented answer maps to its outcome', () => {
    let server: FakeSlipProvider;
    beforeAll(async () => {
      server = await startFakeSlipProvider();
    });
    afterAll(async () => {
      await server.close();
    });

    it.each(cases)('%s', async (_label, status, body, expected) => {
      server.reset();
      server.answer((_request, response) => sendJson(response, status, body, typeof body === 'string' ? 'text/html' : 'application/json'));
      expect(await makeVerifier(server.url).verifyTransfer(QUERY)).toEqual(expected);
    });
  });
}

/** Configuration mistakes fail at construction, without repeating any credential. */
export function expectRefusedConfiguration(make: () => unknown, secret: string): void {
  let message = '';
  try {
    make();
  } catch (error) {
    message = (error as Error).message;
  }
  expect(message).toMatch(/^invalid slip verifier configuration/);
  expect(message).not.toContain(secret);
}
