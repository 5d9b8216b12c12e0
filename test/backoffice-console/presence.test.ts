import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { MerchantCredentials, TestApp } from '../support/app.ts';
import { caseInReview, consoleAppWithMerchant, consoleGet, signIn } from '../support/console.ts';
import { consoleTexts } from '../../src/backoffice-console/texts.ts';
import { escapeHtml } from '../../src/backoffice-console/html.ts';
import { PRESENCE_WINDOW_MS } from '../../src/backoffice-console/presence.ts';

/**
 * Who is on a case, over HTTP on a real socket: a reviewer who opens a case shows on the other reviewers' queue and
 * on their view of the case, the open page's polling keeps them there and brings the others' names back, nobody is
 * shown to themselves, the queue's polling state changes when a case is taken up, and a closed page drops out
 * after the presence window (on the test clock). Names are text.
 */

const EN = consoleTexts('en');
const HOSTILE_NAME = `Somsri <script>alert("x")</script> & 'co'`;

let app: TestApp;
let base: string;
let merchant: MerchantCredentials;

beforeAll(async () => {
  ({ app, base, merchant } = await consoleAppWithMerchant());
}, 60_000);

afterAll(async () => {
  await app.close();
});

async function page(path: string, cookie: string): Promise<string> {
  const response = await consoleGet(base, path, cookie);
  expect(response.status).toBe(200);
  return response.text();
}

async function caseState(deposit_id: string, cookie: string): Promise<{ state: string; viewers: string }> {
  const response = await consoleGet(base, `/bo/reviews/${deposit_id}/state?lang=en`, cookie);
  expect(response.status).toBe(200);
  return response.json() as Promise<{ state: string; viewers: string }>;
}

async function queueState(cookie: string): Promise<string> {
  return ((await (await consoleGet(base, '/bo/reviews/state', cookie)).json()) as { state: string }).state;
}

describe('who is on a case', () => {
  it('shows on the queue and the case of the others, never to oneself, and drops out when the page is closed', async () => {
    const order = await caseInReview(app, merchant, `presence-${Date.now()}`);
    const somsri = await signIn(app, base, { brand: app.sandbox.white_label_id, role: 'reviewer', name: HOSTILE_NAME });
    const niran = await signIn(app, base, { brand: app.sandbox.white_label_id, role: 'reviewer', name: 'Niran' });
    const openBy = (names: string) => escapeHtml(EN.flag_open_by.replace('{names}', names));
    const onCase = (names: string) => EN.presence_case.replace('{names}', names);

    const untaken = await queueState(niran.cookie);
    expect(await page('/bo/reviews?lang=en', niran.cookie)).not.toContain(openBy(HOSTILE_NAME));
    // Somsri opens the case: her own page does not name her, Niran's queue does (as text), and its state moved.
    const hers = await page(`/bo/reviews/${order.id}?lang=en`, somsri.cookie);
    expect(hers).toContain('<p id="case-presence" class="presence" role="status" data-presence></p>');
    expect(await page('/bo/reviews?lang=en', niran.cookie)).toContain(openBy(HOSTILE_NAME));
    expect(await queueState(niran.cookie)).not.toBe(untaken);
    expect(await page('/bo/reviews?lang=en', somsri.cookie)).not.toContain(openBy(HOSTILE_NAME));

    // Niran opens it too: each sees the other, on the page and in the polling answer (text, which the script writes as text).
    expect(await page(`/bo/reviews/${order.id}?lang=en`, niran.cookie)).toContain(escapeHtml(onCase(HOSTILE_NAME)));
    expect((await caseState(order.id, somsri.cookie)).viewers).toBe(onCase('Niran'));
    expect((await caseState(order.id, niran.cookie)).viewers).toBe(onCase(HOSTILE_NAME));

    // Niran closes the page (no more polls): Somsri's own polls keep her on the case, and she sees him until the
    // window has passed since his last poll.
    for (let step = 0; step < 3; step += 1) {
      app.clock.advance(PRESENCE_WINDOW_MS / 4);
      expect((await caseState(order.id, somsri.cookie)).viewers).toBe(onCase('Niran'));
    }
    app.clock.advance(PRESENCE_WINDOW_MS / 2);
    expect((await caseState(order.id, somsri.cookie)).viewers).toBe('');
    expect(await page('/bo/reviews?lang=en', somsri.cookie)).not.toContain(openBy('Niran'));
    expect(await page('/bo/reviews?lang=en', niran.cookie)).toContain(openBy(HOSTILE_NAME));
  });

  it('the same person in two sessions is not shown to themselves', async () => {
    const order = await caseInReview(app, merchant, `presence-self-${Date.now()}`);
    const first = await signIn(app, base, { brand: app.sandbox.white_label_id, role: 'reviewer', name: 'Mali' });
    const second = await signIn(app, base, { brand: app.sandbox.white_label_id, role: 'reviewer', staff: first.link.staff_id });
    await page(`/bo/reviews/${order.id}?lang=en`, first.cookie);
    expect((await caseState(order.id, second.cookie)).viewers).toBe('');
    expect(await page('/bo/reviews?lang=en', second.cookie)).not.toContain(escapeHtml(EN.flag_open_by.replace('{names}', 'Mali')));
  });
});
