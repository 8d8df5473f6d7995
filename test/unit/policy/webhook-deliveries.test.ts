/**
 * What a webhook delivery does to an intent (src/policy/webhook-deliveries.ts): the verdict the intent's `webhook`
 * update validator and handler act on, and the bounded memory of recorded delivery ids (invariant 10: a duplicate
 * delivery changes nothing).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Phase, WebhookState } from '../../../src/intent-status.js';
import {
  SEEN_DELIVERIES_LIMIT,
  deliveryKey,
  deliveryVerdict,
  describeRefusal,
  isRefusal,
  rememberDelivery,
} from '../../../src/policy/webhook-deliveries.js';

const delivery = (deliveryId: string, state: WebhookState = 'succeeded', source = 'acme') => ({
  source,
  deliveryId,
  state,
});
const running = (seen: readonly string[] = [], settled = false, phase: Phase = 'waiting') => ({
  seen,
  phase,
  settled,
});

describe('the verdict on a delivery for a running intent', () => {
  it.each([
    ['succeeded', 'settles'],
    ['failed', 'settles'],
    ['pending', 'logged'],
  ] as const)('records a first %s delivery as "%s"', (state, kind) => {
    expect(deliveryVerdict(delivery('msg_1', state), running())).toEqual({ kind });
  });

  it.each(['scheduled', 'dispatching', 'waiting', 'inspecting'] as const)(
    'records a new delivery while the intent is %s',
    (phase) => {
      expect(isRefusal(deliveryVerdict(delivery('msg_1'), running([], false, phase)))).toBe(false);
    },
  );

  it('notes a delivery as late once an earlier one settled the intent, whatever its state', () => {
    for (const state of ['succeeded', 'failed', 'pending'] as const)
      expect(deliveryVerdict(delivery('msg_2', state), running(['acme:msg_1'], true))).toEqual({ kind: 'late' });
  });
});

describe('deliveries the intent turns away (invariant 10: a duplicate changes nothing)', () => {
  it('turns away a delivery id it has already recorded, from the same source', () => {
    const verdict = deliveryVerdict(delivery('msg_1', 'failed'), running(['acme:msg_1']));
    expect(verdict).toEqual({ kind: 'duplicate', id: 'acme:msg_1' });
    expect(isRefusal(verdict)).toBe(true);
    expect(describeRefusal(verdict as Extract<typeof verdict, { kind: 'duplicate' }>)).toBe(
      'delivery acme:msg_1 is already recorded by this intent; nothing changes',
    );
  });

  it('tells the same delivery id apart when it comes from another source', () => {
    expect(deliveryVerdict(delivery('msg_1', 'succeeded', 'other'), running(['acme:msg_1']))).toEqual({
      kind: 'settles',
    });
  });

  it.each(['succeeded', 'failed', 'expired', 'cancelled'] as const)(
    'turns away any new delivery once the intent has %s',
    (phase) => {
      const verdict = deliveryVerdict(delivery('msg_9'), running([], false, phase));
      expect(verdict).toEqual({ kind: 'ended', phase });
      expect(describeRefusal(verdict as Extract<typeof verdict, { kind: 'ended' }>)).toBe(
        `the intent has already ended (${phase}); nothing changes`,
      );
    },
  );

  it('calls a redelivery to an ended intent a duplicate, not a new late delivery', () => {
    expect(deliveryVerdict(delivery('msg_1'), running(['acme:msg_1'], false, 'succeeded')).kind).toBe('duplicate');
  });

  it('turns away every redelivery of a recorded id, whatever the intent does in between (property)', () => {
    const phases: Phase[] = ['scheduled', 'dispatching', 'waiting', 'inspecting', 'succeeded', 'failed'];
    fc.assert(
      fc.property(
        fc.array(fc.stringMatching(/^[a-z0-9]{1,4}$/), { minLength: 1, maxLength: 60 }),
        fc.constantFrom(...phases),
        fc.boolean(),
        (ids, phase, settled) => {
          let seen: string[] = [];
          const recorded = new Set<string>();
          for (const id of ids) {
            const verdict = deliveryVerdict(delivery(id), running(seen, settled, phase));
            if (recorded.has(id)) expect(verdict.kind).toBe('duplicate');
            if (!isRefusal(verdict)) {
              seen = rememberDelivery(seen, delivery(id));
              recorded.add(id);
            }
          }
          // Fewer distinct ids than the limit: nothing was forgotten, so each was recorded at most once.
          expect(seen.length).toBe(new Set(seen).size);
        },
      ),
    );
  });
});

describe('the memory of recorded delivery ids', () => {
  it('remembers `<source>:<deliveryId>` without changing the list it was given', () => {
    const before = ['acme:msg_1'];
    expect(rememberDelivery(before, delivery('msg_2'))).toEqual(['acme:msg_1', 'acme:msg_2']);
    expect(before).toEqual(['acme:msg_1']);
    expect(deliveryKey(delivery('msg_2', 'pending', 'b'))).toBe('b:msg_2');
  });

  it(`keeps the last ${SEEN_DELIVERIES_LIMIT} ids, forgetting the oldest first`, () => {
    let seen: string[] = [];
    for (let i = 0; i < SEEN_DELIVERIES_LIMIT + 5; i++) seen = rememberDelivery(seen, delivery(`m${i}`));
    expect(seen).toHaveLength(SEEN_DELIVERIES_LIMIT);
    expect(seen[0]).toBe('acme:m5');
    expect(seen.at(-1)).toBe(`acme:m${SEEN_DELIVERIES_LIMIT + 4}`);
    expect(rememberDelivery(['a:1', 'a:2', 'a:3'], delivery('4', 'pending', 'a'), 2)).toEqual(['a:3', 'a:4']);
  });
});
