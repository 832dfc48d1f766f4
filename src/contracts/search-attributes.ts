/**
 * Custom search attributes, so the Web UI and `temporal workflow list --query` can find a hold's workflow.
 * Registered on the dev server at start-up; production registers them once (see docker-compose.yml).
 * All are Keyword: exact-match filters, and the dev server's SQLite visibility has ten Keyword slots.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

const RegionKey = defineSearchAttributeKey('Region', SearchAttributeType.KEYWORD);
export const MerchantIdKey = defineSearchAttributeKey('MerchantId', SearchAttributeType.KEYWORD);
export const HoldIdKey = defineSearchAttributeKey('HoldId', SearchAttributeType.KEYWORD);
export const DeliveryStatusKey = defineSearchAttributeKey('DeliveryStatus', SearchAttributeType.KEYWORD);

export const SEARCH_ATTRIBUTES = [RegionKey, MerchantIdKey, HoldIdKey, DeliveryStatusKey] as const;

/**
 * The values of `DeliveryStatus` on a webhook's delivery workflow (a hold's release, an event's or a resend's
 * delivery), the operator's filter for "where is this hold's webhook":
 * - `pending`: being released or delivered (set when the workflow starts; again after a replay is approved and after a
 *   held merchant's re-check);
 * - `held`: the merchant is paused or disabled; its backlog waits and drains when it is active again;
 * - `quarantined`: the policy gave up; waiting for a human (approveReplay / discard);
 * - `delivered`, `discarded`, `abandoned` (no decision within the quarantine timeout): terminal;
 * - `none`: this workflow released nothing (the hold was rejected, not expired any more, or gone).
 */
export const DELIVERY_STATUS_VALUES = [
  'pending',
  'held',
  'quarantined',
  'delivered',
  'discarded',
  'abandoned',
  'none',
] as const;
export type DeliveryStatusValue = (typeof DELIVERY_STATUS_VALUES)[number];

/**
 * The values of `DeliveryStatus` on a hold's event workflow (holdEvents), which delivers nothing itself (each applied
 * event's webhook has its own delivery workflow): `event_gap` while it is stopped for a human at a missing sequence,
 * `none` once the gap is closed. Started without one.
 */
export const EVENT_WORKFLOW_STATUS_VALUES = ['event_gap', 'none'] as const;
type EventWorkflowStatusValue = (typeof EVENT_WORKFLOW_STATUS_VALUES)[number];

/** Every value any workflow writes to `DeliveryStatus`: a closed set, enforced by `deliveryStatusUpdate`'s type. */
type DeliveryStatusAttribute = DeliveryStatusValue | EventWorkflowStatusValue;

/**
 * The one builder of a hold workflow's search attributes at its start: who and where, and for a delivery workflow
 * DeliveryStatus `pending`, set at the start rather than upserted by the workflow (one event less per hold on the
 * hot path). A hold's event workflow is started without a status, and without a merchant when its hold is unknown.
 */
export function holdSearchAttributes(a: {
  region: string;
  holdId: string;
  merchantId?: string;
  deliveryStatus?: 'pending';
}) {
  return [
    { key: RegionKey, value: a.region },
    { key: HoldIdKey, value: a.holdId },
    ...(a.merchantId === undefined ? [] : [{ key: MerchantIdKey, value: a.merchantId }]),
    ...(a.deliveryStatus === undefined ? [] : [{ key: DeliveryStatusKey, value: a.deliveryStatus }]),
  ];
}

/**
 * What a delivery workflow is started with (a hold's release, an event's, a resend's): `holdSearchAttributes`, pending.
 */
export const deliveryStartAttributes = (region: string, holdId: string, merchantId: string) =>
  holdSearchAttributes({ region, holdId, merchantId, deliveryStatus: 'pending' });

/** The upsert that moves a workflow's `DeliveryStatus`: only a value of the closed set compiles. */
export const deliveryStatusUpdate = (status: DeliveryStatusAttribute) => [{ key: DeliveryStatusKey, value: status }];
