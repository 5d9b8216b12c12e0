import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { GAP_LOSS_AFTER_MS, MemoryEventStore, applyEvent, isKnownEvent, reconcile, type DepositOrder, type KnownEvent, type PaymentEvent, type UnknownEvent } from '../src/index.ts';
import { startService, type ListeningService } from './support/service.ts';

/**
 * Reconciliation over the real events feed: every event after `since_sequence`, in order, through the
 * store; and gaps in the sequence, pending while young and lost after 4 days. A gap is made the only way
 * the feed can have one here: an event row is removed from the outbox, as if it had been lost.
 */

let service: ListeningService;

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  await service.close();
});

async function createOrder(): Promise<DepositOrder> {
  const reference = `rec-${crypto.randomBytes(6).toString('hex')}`;
  return service.client().deposits.create({
    amount_minor: 10_000,
    currency: 'THB',
    merchant_reference: reference,
    end_user_ref: `user-${reference}`,
    sender: { bank_code: '002', account_number: `55${crypto.randomInt(10_000_000, 99_999_999)}`, account_name_th: 'สมชาย ใจดี' },
    client: { device_fingerprint: `device-${reference}`, ip: '203.0.113.11', user_agent: 'sdk-reconcile' },
  });
}

describe('reconcile', () => {
  it('hands every event to the store in sequence order, page by page, and reports no gap when there is none', async () => {
    const orders = [await createOrder(), await createOrder(), await createOrder()];
    await service.client().deposits.cancel(orders[1]!.id);
    const store = new MemoryEventStore();
    const seen: number[] = [];
    const result = await reconcile({
      client: service.client(),
      since_sequence: 0,
      page_size: 2,
      on_event: async (event) => {
        seen.push(event.sequence);
        await applyEvent(store, event);
      },
    });
    expect(result.events).toBeGreaterThanOrEqual(4);
    expect(seen).toEqual([...seen].sort((left, right) => left - right));
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, index) => index + 1));
    expect(result).toMatchObject({ gaps: [], lost: [], has_more: false, last_sequence: seen.at(-1), next_since_sequence: seen.at(-1) });
    expect(store.get('deposit_order', orders[1]!.id)).toMatchObject({ status: 'canceled', version: 2 });
    // From where it stopped, nothing new.
    expect(await reconcile({ client: service.client(), since_sequence: result.next_since_sequence })).toMatchObject({ events: 0, gaps: [] });
    // Bounded: one page of one event, and it says there is more.
    expect(await reconcile({ client: service.client(), since_sequence: 0, page_size: 1, max_pages: 1 })).toMatchObject({ events: 1, has_more: true, next_since_sequence: 1 });
  });

  it('reports a missing sequence as a pending gap, and as lost once it is older than 4 days', async () => {
    const order = await createOrder();
    await createOrder();
    const { rows } = await service.app.testDatabase.database.query<{ event_id: string; sequence: number }>(
      'SELECT event_id, sequence FROM events WHERE object_id = $1 ORDER BY sequence',
      [order.id],
    );
    const lostEvent = rows[0]!;
    await service.app.testDatabase.database.query('DELETE FROM events WHERE event_id = $1', [lostEvent.event_id]);
    const missing = Number(lostEvent.sequence);

    const young = await reconcile({ client: service.client(), since_sequence: 0 });
    expect(young.gaps).toEqual([expect.objectContaining({ after_sequence: missing - 1, before_sequence: missing + 1, missing: 1, lost: false })]);
    expect(young.lost).toEqual([]);
    // The next run starts before the gap, so the event is read if it shows up.
    expect(young.next_since_sequence).toBe(missing - 1);

    const later = await reconcile({ client: service.client(), since_sequence: 0, now_ms: () => Date.now() + GAP_LOSS_AFTER_MS + 60_000 });
    expect(later.lost).toEqual([expect.objectContaining({ after_sequence: missing - 1, before_sequence: missing + 1, lost: true })]);
    expect(later.next_since_sequence).toBe(later.last_sequence);
  });

  it('events narrow by type after isKnownEvent; an unknown type stays in the default branch', async () => {
    const page = await service.client().events.list({ since_sequence: 0, limit: 10 });
    const event: PaymentEvent = page.data[0]!;
    if (isKnownEvent(event)) {
      expectTypeOf(event).toEqualTypeOf<KnownEvent>();
      // Only deposit.matched carries the legs (payment instructions); the other deposit events leave them out.
      if (event.type === 'deposit.created') expectTypeOf(event.data.object).toEqualTypeOf<Omit<DepositOrder, 'legs'>>();
      if (event.type === 'deposit.matched') expectTypeOf(event.data.object).toEqualTypeOf<DepositOrder>();
      expect(event.type.includes('.')).toBe(true);
    } else {
      expectTypeOf(event).toEqualTypeOf<UnknownEvent>();
    }
    const future = { ...event, type: 'deposit.teleported' } as PaymentEvent;
    expect(isKnownEvent(future)).toBe(false);
    // The service's own balance credits are known, typed as the movements they carry.
    for (const type of ['balance.released', 'balance.adjusted']) expect(isKnownEvent({ ...event, type } as PaymentEvent)).toBe(true);
  });
});
