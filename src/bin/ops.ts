/**
 * `npm run ops -- <command>`: the operator CLI (src/operations/cli.ts). Exit codes: 0 done, 3 refused by the workflow
 * or the ledger, 2 a named operator or configuration error, 1 anything unexpected.
 */
import '../node-version.js';
import { operatorErrorText, runOps } from '../operations/cli.js';

runOps(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const named = operatorErrorText(err, process.argv.includes('--json'));
    console.error(named ?? err);
    process.exit(named === undefined ? 1 : 2);
  },
);
