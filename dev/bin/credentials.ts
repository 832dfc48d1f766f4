/**
 * `npm run credentials [-- --out deploy/secrets --days 30]`: the certificates and tokens docker-compose.yml's locked
 * Temporal needs (dev/credentials.ts). Key and token files are readable by their owner only; the containers run as
 * uid 1000 (the node and temporal images' users).
 */
import '../../src/node-version.js';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { writeComposeCredentials } from '../credentials.js';

const { values } = parseArgs({
  options: { out: { type: 'string', default: 'deploy/secrets' }, days: { type: 'string', default: '30' } },
});
const days = Number(values.days);
if (!Number.isInteger(days) || days < 1 || days > 397) {
  console.error(`--days ${values.days}: a whole number of days, 1 to 397`);
  process.exit(2);
}
const dir = path.resolve(values.out!);
try {
  const { callers } = await writeComposeCredentials(dir, days);
  console.log(`Credentials for the locked Temporal in ${dir}, valid ${days} days:`);
  for (const caller of callers) {
    console.log(
      `  ${caller.name.padEnd(15)} ${(caller.permissions.join(', ') || 'certificate only').padEnd(45)} ${caller.who}`,
    );
  }
} catch (err) {
  console.error((err as Error).message);
  process.exit(2);
}
