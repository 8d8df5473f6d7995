/**
 * What one verified webhook delivery does to an intent, decided before anything is written: a delivery id the
 * intent has already recorded, or a delivery for an intent that has ended, is turned away (the workflow rejects it
 * in its update's validator, so it leaves no trace in history); any other delivery is recorded with one effect.
 * The intent remembers the ids it recorded in a bounded list, oldest forgotten first.
 *
 * Pure and workflow-safe: no Temporal, no zod, no clock.
 *
 * @example
 * ```ts
 * import { deliveryVerdict, rememberDelivery } from './webhook-deliveries.js';
 * const d = { source: 'acme', deliveryId: 'msg_1', state: 'succeeded' } as const;
 * deliveryVerdict(d, { seen: [], phase: 'waiting', settled: false }); // { kind: 'settles' }
 * const seen = rememberDelivery([], d);                                // ['acme:msg_1']
 * deliveryVerdict(d, { seen, phase: 'waiting', settled: true });      // { kind: 'duplicate', id: 'acme:msg_1' }
 * ```
 *
 * @module
 */
import type { Phase, WebhookState } from '../intent-status.js';

/** Delivery ids an intent remembers (oldest forgotten first; a forgotten one recorded again changes nothing). */
export const SEEN_DELIVERIES_LIMIT = 200;

/** The phases in which an intent has ended: a delivery can no longer change anything. */
const endedPhases: ReadonlySet<string> = new Set(['succeeded', 'failed', 'expired', 'cancelled']);

/** What the verdict needs to know of a delivery. */
export interface DeliveryRef {
  /** The configured source it came through. */
  source: string;
  /** The provider's delivery id, the same on every redelivery of one event. */
  deliveryId: string;
  state: WebhookState;
}

/** What the verdict needs to know of the intent. */
export interface DeliveryContext {
  /** Ids the intent has recorded ({@link deliveryKey}), oldest first. */
  seen: readonly string[];
  phase: Phase;
  /** An earlier delivery's final state is waiting to be applied. */
  settled: boolean;
}

/**
 * What a delivery does.
 *
 * Turned away (nothing is recorded):
 * - `duplicate`: the intent has already recorded this delivery id;
 * - `ended`: the intent has ended (`phase`), nothing can move it.
 *
 * Recorded:
 * - `settles`: the first final state (`succeeded` / `failed`); the intent ends by it at its next step, without
 *   another provider call;
 * - `logged`: a `pending` state, logged; nothing moves;
 * - `late`: an earlier delivery already settled the intent; this one is noted only.
 */
export type DeliveryVerdict =
  | { kind: 'duplicate'; id: string }
  | { kind: 'ended'; phase: Phase }
  | { kind: 'settles' }
  | { kind: 'logged' }
  | { kind: 'late' };

/** A verdict that turns the delivery away. */
export type DeliveryRefusal = Extract<DeliveryVerdict, { kind: 'duplicate' | 'ended' }>;
/** A verdict that records the delivery. */
export type DeliveryEffect = Exclude<DeliveryVerdict, DeliveryRefusal>['kind'];

/** `<source>:<deliveryId>`: how the intent remembers a delivery. */
export function deliveryKey(d: Pick<DeliveryRef, 'source' | 'deliveryId'>): string {
  return `${d.source}:${d.deliveryId}`;
}

/** The verdict on `d` for an intent in `ctx`. A duplicate is recognised first, even by an ended intent. */
export function deliveryVerdict(d: DeliveryRef, ctx: DeliveryContext): DeliveryVerdict {
  const id = deliveryKey(d);
  if (ctx.seen.includes(id)) return { kind: 'duplicate', id };
  if (endedPhases.has(ctx.phase)) return { kind: 'ended', phase: ctx.phase };
  if (ctx.settled) return { kind: 'late' };
  return d.state === 'pending' ? { kind: 'logged' } : { kind: 'settles' };
}

/** Whether the verdict turns the delivery away. */
export function isRefusal(v: DeliveryVerdict): v is DeliveryRefusal {
  return v.kind === 'duplicate' || v.kind === 'ended';
}

/** Why a refused delivery was turned away, in one sentence. */
export function describeRefusal(v: DeliveryRefusal): string {
  return v.kind === 'duplicate'
    ? `delivery ${v.id} is already recorded by this intent; nothing changes`
    : `the intent has already ended (${v.phase}); nothing changes`;
}

/** `seen` with `d` remembered, at most `limit` ids (the oldest dropped). A new array; `seen` is not changed. */
export function rememberDelivery(
  seen: readonly string[],
  d: Pick<DeliveryRef, 'source' | 'deliveryId'>,
  limit = SEEN_DELIVERIES_LIMIT,
): string[] {
  const next = [...seen, deliveryKey(d)];
  return next.length > limit ? next.slice(next.length - limit) : next;
}
