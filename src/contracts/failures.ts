/**
 * Failure types and reasons that cross the boundary between activities, workflows and operators. A type name here
 * is a Temporal failure `type` (set by an activity, matched by a retry policy or a workflow) or a code stored in
 * the ledger and shown to operators: keep the names stable. The error classes behind them live with the code
 * that raises them (src/errors.ts, src/delivery/*); this file only names them, so the workflow bundle can too.
 */

/**
 * Why a hold row cannot be released; each code is a distinct data problem upstream. A row with one is marked
 * `rejected` with the code, so it never blocks a sweep; fix it upstream and set its state back to 'active'. The
 * first four are read off the row by the sweep's page query (reported in the sweep's result and log) and by the
 * release alike; `InsufficientHeldBalance` only by the release, when the account's `held_minor >= 0` check refuses
 * it (the account's held balance does not cover the hold, which the row alone cannot show).
 */
/**
 * Why a hold row can never be released as written. `UnusableHoldId`: its id cannot be part of a workflow id under the
 * server's id limit (or holds a control character), so no workflow can be started for it (the sweep's page query).
 */
export type InvalidHoldCode =
  | 'NonPositiveAmount'
  | 'UnknownAccount'
  | 'UnknownMerchant'
  | 'CurrencyMismatch'
  | 'InsufficientHeldBalance'
  | 'UnusableHoldId';

/**
 * Named release failures that can never succeed, however often the release is retried: each is the Temporal failure
 * type of its error class (src/errors.ts) and is non-retryable in the ledger profiles. The release itself turns each
 * into its `rejected` outcome with the type as its code, so the hold's workflow ends cleanly (DeliveryStatus `none`):
 * - `InsufficientHeldBalance`: releasing would take the account's held balance below zero; the hold is marked
 *   `rejected` with this code (see InvalidHoldCode) and nothing else is written;
 * - `ReleasedWithoutWebhook`: the hold is released but its webhook (the release's outbox row) is missing, so there
 *   is nothing to deliver. The row stays `released`: its ledger entry is real and the money has moved; the chaos
 *   suite's invariant 3 names it for a human.
 */
export const RELEASE_FAILURE_TYPES = ['InsufficientHeldBalance', 'ReleasedWithoutWebhook'] as const;
export type ReleaseFailureType = (typeof RELEASE_FAILURE_TYPES)[number];

export const NON_RETRYABLE_LEDGER_ERRORS: string[] = [...RELEASE_FAILURE_TYPES];

/** Named, non-retryable delivery failures: each class name is the Temporal failure type. */
export const DELIVERY_FAILURE_TYPES = {
  /** 3xx or a 4xx other than 408/425/429/410. */
  WebhookRejected: 'rejected',
  /** 410 Gone: the merchant endpoint is disabled as well. */
  EndpointGone: 'endpoint_gone',
  /** Malformed URL, a scheme or an address not allowed in this mode. */
  InvalidEndpointUrl: 'bad_url',
  /** No signing secret, or one that does not decode. */
  MissingSigningSecret: 'missing_secret',
  /** merchants.delivery_policy cannot be used. */
  InvalidDeliveryPolicyError: 'invalid_policy',
} as const;

export type QuarantineReason = (typeof DELIVERY_FAILURE_TYPES)[keyof typeof DELIVERY_FAILURE_TYPES] | 'exhausted';

/** Every quarantine reason, in the order operators read them (the CLI's help, the API's enum, the gauges' labels). */
export const QUARANTINE_REASONS: readonly QuarantineReason[] = [
  'rejected',
  'exhausted',
  'endpoint_gone',
  'bad_url',
  'missing_secret',
  'invalid_policy',
];

export const NON_RETRYABLE_DELIVERY_ERRORS = Object.keys(DELIVERY_FAILURE_TYPES);

/** The failure type a retryable attempt is reported with (carrying its own nextRetryDelay). */
export const RETRYABLE_DELIVERY_FAILURE = 'WebhookAttemptFailed';
