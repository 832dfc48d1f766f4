/** `npm run docs:rights`: docs/security.md's table of the ledger's rights, written from src/db/rights.ts. */
import '../../src/node-version.js';
import { SECURITY_DOC, writeRightsDoc } from '../rights-docs.js';

console.log(writeRightsDoc() ? `${SECURITY_DOC}: table rewritten` : `${SECURITY_DOC}: up to date`);
