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
  /**
   * Every problem a loader found, this one first: the loaders report them all at once (`ConfigError.all`). Not
   * enumerable: a log line carries them once, in the message.
   */
  declare readonly problems: readonly ConfigError[];
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
    Object.defineProperty(this, 'problems', { value: [this], writable: true });
  }

  /** One error for several problems: the first's variable, every problem's line in the message. */
  static all(problems: readonly ConfigError[]): ConfigError {
    const [first, ...more] = problems;
    if (!first) throw new Error('ConfigError.all needs a problem');
    if (more.length === 0) return first;
    const error = new ConfigError(first.variable, first.value, first.expected);
    error.message = `${problems.length} configuration problems:\n${problems.map((p) => `  ${p.message}`).join('\n')}`;
    Object.defineProperty(error, 'problems', { value: problems });
    return error;
  }
}

/** A worker's build could not be made its Worker Deployment's current version (see docs/deploys.md). */
export class DeploymentError extends Error {
  override readonly name = 'DeploymentError';
  constructor(
    readonly version: string,
    detail: string,
  ) {
    super(
      `Worker Deployment version ${version} ${detail}. Make it current with npm run promote (the namespace's admin ` +
        'credential) or by hand (temporal worker deployment set-current-version), and start workers with WORKER_SET_CURRENT=never.',
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

/**
 * A service the local stack starts itself (the embedded PostgreSQL, the Temporal dev server) did not start. Every
 * way a start can fail ends here, never as an unhandled 'error' event of a child process.
 */
export class EmbeddedServiceError extends Error {
  override readonly name = 'EmbeddedServiceError';
  constructor(
    readonly service: string,
    readonly problem: string,
    readonly remedy: string,
    options?: ErrorOptions,
  ) {
    super(`${service} did not start: ${problem}\nWhat to do: ${remedy}`, options);
  }
}

/** Operator commands: a named error for each way a request can be refused. */
export class OperatorError extends Error {
  override readonly name = 'OperatorError';
  constructor(
    readonly code:
      | 'HoldNotFound'
      | 'NoDelivery'
      | 'ReplayRequestNotFound'
      | 'ReplayAlreadyApproved'
      | 'SelfApprovalRefused'
      | 'FourEyesRequired'
      | 'SkipRequestNotFound'
      | 'SkipAlreadyApproved'
      | 'SkipNotRecorded'
      | 'EmptySelection'
      | 'MerchantNotFound'
      | 'DestinationNotFound'
      | 'MerchantExists'
      | 'MerchantBudgetBusy'
      | 'NoHoldEvents'
      | 'NotWaitingForSequence'
      | 'ReviewNotOpen'
      | 'NotAnEventWebhook'
      | 'NotPending'
      | 'NotQuarantined'
      | 'DeliveryRunning'
      | 'SendsPaused'
      | 'SendsAlreadyPaused'
      | 'SendsNotPaused'
      | 'SweepsPaused'
      | 'SweepsAlreadyPaused'
      | 'SweepsNotPaused'
      | 'NotAtAnEnd'
      | 'ResendRefused'
      | 'ApiKeyNotFound',
    message: string,
  ) {
    super(message);
  }
}

/** A merchant setting an operator gave that cannot be used (`npm run ops -- merchant ...`); names the setting. */
export class InvalidMerchantSetting extends Error {
  override readonly name = 'InvalidMerchantSetting';
  constructor(
    readonly setting: string,
    readonly value: unknown,
    readonly expected: string,
  ) {
    super(`merchant ${setting} ${JSON.stringify(value)} is invalid: expected ${expected}`);
  }
}

/**
 * The release would take the account's held balance below zero (`accounts.held_minor >= 0`): the account's held
 * balance does not cover the hold, so the account or the hold is wrong upstream. Never retried: the release marks
 * the hold `rejected` with this name as its code (src/contracts/failures.ts).
 */
export class InsufficientHeldBalance extends Error {
  override readonly name = 'InsufficientHeldBalance';
  constructor(
    readonly holdId: string,
    readonly accountId: string,
    readonly amountMinor: string,
  ) {
    super(
      `hold ${holdId} cannot be released: account ${accountId}'s held balance is less than its ${amountMinor} (minor units); ` +
        `correct the account's held_minor (or the hold) upstream, then set the hold's state back to 'active'`,
    );
  }
}

/**
 * A released hold has no webhook row (the release's outbox), so there is nothing to deliver. Never retried: the
 * release reports it `rejected` with this name as its code and leaves the hold released (its ledger entry stands).
 */
export class ReleasedWithoutWebhook extends Error {
  override readonly name = 'ReleasedWithoutWebhook';
  constructor(readonly holdId: string) {
    super(
      `hold ${holdId} is released but has no webhook_deliveries row: it was released outside this service or its row was ` +
        `deleted; find out which before writing the merchant's webhook by hand`,
    );
  }
}
