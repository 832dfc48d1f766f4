/** `npm run docs:config`: docs/configuration.md's variable tables, written from src/config-schema.ts. */
import '../../src/node-version.js';
import { CONFIGURATION_DOC, writeConfigurationDoc } from '../config-docs.js';

console.log(writeConfigurationDoc() ? `${CONFIGURATION_DOC}: tables rewritten` : `${CONFIGURATION_DOC}: up to date`);
