/**
 * Custom search attributes, so the Web UI and `temporal workflow list --query` can find a hold's workflow.
 * Registered on the dev server at start-up; production registers them once (see docker-compose.yml).
 * All are Keyword: exact-match filters, and the dev server's SQLite visibility has ten Keyword slots.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const RegionKey = defineSearchAttributeKey('Region', SearchAttributeType.KEYWORD);
export const MerchantIdKey = defineSearchAttributeKey('MerchantId', SearchAttributeType.KEYWORD);
export const HoldIdKey = defineSearchAttributeKey('HoldId', SearchAttributeType.KEYWORD);
export const DeliveryStatusKey = defineSearchAttributeKey('DeliveryStatus', SearchAttributeType.KEYWORD);

export const SEARCH_ATTRIBUTES = [RegionKey, MerchantIdKey, HoldIdKey, DeliveryStatusKey] as const;

/**
 * What a webhook's delivery workflow is started with (a hold's release by its sweep or the outbox reconciler, an
 * event's by its hold's event workflow or an operator): who and where, and DeliveryStatus `pending`, set at the start
 * rather than upserted by the workflow (one event less per hold on the hot path).
 */
export function deliveryStartAttributes(region: string, holdId: string, merchantId: string) {
  return [
    { key: RegionKey, value: region },
    { key: HoldIdKey, value: holdId },
    { key: MerchantIdKey, value: merchantId },
    { key: DeliveryStatusKey, value: 'pending' },
  ];
}

/**
 * The values of `DeliveryStatus`, the operator's filter for "where is this hold's webhook":
 * - `pending`: being released or delivered (set by the sweep when it starts the hold's workflow; again after a replay
 *   is approved and after a held merchant's re-check);
 * - `held`: the merchant is paused or disabled; its backlog waits and drains when it is active again;
 * - `quarantined`: the policy gave up; waiting for a human (approveReplay / discard);
 * - `delivered`, `discarded`, `abandoned` (no decision within the quarantine timeout): terminal;
 * - `none`: this workflow released nothing (the hold was rejected, not expired any more, or gone).
 */
export const DELIVERY_STATUS_VALUES = ['pending', 'held', 'quarantined', 'delivered', 'discarded', 'abandoned', 'none'] as const;
export type DeliveryStatusValue = (typeof DELIVERY_STATUS_VALUES)[number];
