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
      value === undefined ? `${variable} is not set: expected ${expected}` : `${variable}=${JSON.stringify(value)} is invalid: expected ${expected}`,
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
    readonly code: 'HoldNotFound' | 'NoDelivery' | 'ReplayRequestNotFound' | 'ReplayAlreadyApproved' | 'SelfApprovalRefused' | 'EmptySelection',
    message: string,
  ) {
    super(message);
  }
}
