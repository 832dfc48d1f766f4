/**
 * `npm run docs:config`: docs/configuration.md's variable tables, written from src/config-schema.ts, and
 * docs/security.md's cluster rights, from deploy/temporal/server/cluster-rights.json.
 */
import '../../src/node-version.js';
import { SECURITY_DOC, writeSecurityDoc } from '../cluster-rights.js';
import { CONFIGURATION_DOC, writeConfigurationDoc } from '../config-docs.js';

console.log(writeConfigurationDoc() ? `${CONFIGURATION_DOC}: tables rewritten` : `${CONFIGURATION_DOC}: up to date`);
console.log(writeSecurityDoc() ? `${SECURITY_DOC}: cluster rights rewritten` : `${SECURITY_DOC}: up to date`);
