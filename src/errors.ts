/**
 * Every named error this service raises, in one place.
 *
 * A class name here doubles as the Temporal failure `type` when the error crosses an activity boundary, so
 * the names are part of the contract with retry policies, dashboards and runbooks: keep them stable.
 * Messages say what is wrong and how to fix it, and never carry a secret.
 */

/** A configuration variable is missing or has a value this service cannot use. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    readonly variable: string,
    readonly value: string | undefined,
    readonly expected: string,
  ) {
    super(
      value === undefined
        ? `${variable} is not set: expected ${expected}`
        : `${variable}=${JSON.stringify(value)} is invalid: expected ${expected}`,
    );
  }
}

/** No route could provide a `temporal` CLI binary for the local dev server. */
export class TemporalCliNotFoundError extends Error {
  override readonly name = 'TemporalCliNotFoundError';
  constructor(
    readonly attempts: readonly { route: string; outcome: string }[],
    what = 'the `temporal` CLI',
  ) {
    super(
      `Could not obtain ${what}. Routes tried, in order:\n` +
        attempts.map((a, i) => `  ${i + 1}. ${a.route}: ${a.outcome}`).join('\n') +
        '\nSet TEMPORAL_CLI_PATH to an existing binary, or set TEMPORAL_ADDRESS to use a running server.',
    );
  }
}

/** Why a hold row cannot be released; each code is a distinct data problem upstream. */
export const INVALID_HOLD_CODES = [
  'NonPositiveAmount',
  'UnknownAccount',
  'UnknownMerchant',
  'CurrencyMismatch',
] as const;
export type InvalidHoldCode = (typeof INVALID_HOLD_CODES)[number];

/**
 * A hold row that can never be released as written (negative amount, unknown account or merchant...).
 * The row is marked `rejected` with this code so it is reported once and never blocks a sweep.
 */
export class InvalidHoldError extends Error {
  override readonly name = 'InvalidHoldError';
  constructor(
    readonly holdId: string,
    readonly code: InvalidHoldCode,
  ) {
    super(`hold ${holdId} cannot be released: ${code}; fix the row upstream and set its state back to 'active'`);
  }
}

/** Operator commands: a named error for each way a request can be refused. */
export class OperatorError extends Error {
  override readonly name = 'OperatorError';
  constructor(
    readonly code: 'HoldNotFound' | 'NoDelivery' | 'ReplayRequestNotFound' | 'ReplayAlreadyApproved' | 'SelfApprovalRefused' | 'EmptySelection',
    message: string,
  ) {
    super(message);
  }
}
