/**
 * `npm run ops -- <command>`: the operator CLI (src/ops/cli.ts). Exit codes: 0 done, 3 refused by the workflow
 * or the ledger, 2 a named operator or configuration error, 1 anything unexpected.
 */
import { InvalidEndpointUrl } from '../delivery/endpoint.js';
import { InvalidDeliveryPolicyError } from '../delivery/policy.js';
import { MissingSigningSecret } from '../delivery/signing.js';
import { ConfigError, InvalidMerchantSetting, OperatorError } from '../errors.js';
import { AdminApiError } from '../ops/admin-client.js';
import { runOps } from '../ops/cli.js';

/** Errors that name what was wrong with the operator's input or the ledger's row: their message is the answer. */
const NAMED = [
  OperatorError,
  ConfigError,
  InvalidMerchantSetting,
  InvalidEndpointUrl,
  InvalidDeliveryPolicyError,
  MissingSigningSecret,
  AdminApiError,
];

runOps(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const known = NAMED.some((type) => err instanceof type);
    console.error(known ? `${(err as Error).name}${err instanceof OperatorError ? `(${err.code})` : ''}: ${(err as Error).message}` : err);
    process.exit(known ? 2 : 1);
  },
);
