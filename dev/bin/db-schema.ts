/**
 * `npm run db:schema`: rewrites src/db/schema.sql, the schema every migration in src/db/migrations comes to
 * (dev/schema-dump.ts), so the file matches what test/integration/schema.test.ts dumps byte for byte.
 */
import '../../src/node-version.js';
import { writeSchemaFile } from '../schema-dump.js';

try {
  console.log(await writeSchemaFile());
} catch (err) {
  console.error((err as Error).message);
  process.exitCode = 1;
}
