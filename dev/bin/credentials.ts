/**
 * `npm run credentials [-- --out deploy/secrets --days 30]`: every certificate, token, password, key and identity
 * provider setting docker-compose.yml needs (dev/credentials.ts): the one command before `docker compose up`.
 */
import '../../src/node-version.js';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { COMPOSE_DEX, DEMO_USERS, writeComposeCredentials } from '../credentials.js';

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
  console.log(`Credentials for docker-compose.yml in ${dir}, valid ${days} days. Temporal's callers:`);
  for (const caller of callers) {
    console.log(
      `  ${caller.name.padEnd(15)} ${(caller.permissions.join(', ') || 'certificate only').padEnd(45)} ${caller.who}`,
    );
  }
  console.log(`People sign in through Dex (${COMPOSE_DEX.issuer}):`);
  for (const user of DEMO_USERS)
    console.log(`  ${user.name.padEnd(15)} ${user.groups.join(', ').padEnd(58)} ${user.who}`);
  console.log(
    `Their passwords: ${path.join(dir, 'dex/demo-users.txt')}. Trust ${path.join(dir, 'pki/ca.pem')} in your browser.`,
  );
} catch (err) {
  console.error((err as Error).message);
  process.exit(2);
}
