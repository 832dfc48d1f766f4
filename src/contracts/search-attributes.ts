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
