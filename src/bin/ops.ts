/**
 * `npm run ops -- <command>`: the operator CLI (src/ops/cli.ts). Exit codes: 0 done, 3 refused by the workflow
 * or the ledger, 2 a named operator or configuration error, 1 anything unexpected.
 */
import { ConfigError, OperatorError } from '../errors.js';
import { runOps } from '../ops/cli.js';

runOps(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const known = err instanceof OperatorError || err instanceof ConfigError;
    console.error(known ? `${(err as Error).name}${err instanceof OperatorError ? `(${err.code})` : ''}: ${(err as Error).message}` : err);
    process.exit(known ? 2 : 1);
  },
);
