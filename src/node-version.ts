/**
 * Imported first by every entry point: the product runs on Node 24 (the image's, and what the suite runs on). On
 * Linux `npm install` fetches it from the registry (the node-linux-* packages) and every npm script runs on it; run
 * on an older Node some other way, an entry point stops here with a message that says so, rather than with a stack
 * from whichever dependency first needs a newer one.
 */
export const REQUIRED_NODE_MAJOR = 24;

/** Why `version` (e.g. `20.20.2`) cannot run the product; undefined when it can. */
export function unsupportedNode(version: string): string | undefined {
  if (Number(version.split('.')[0]) >= REQUIRED_NODE_MAJOR) return undefined;
  return (
    `hold-sweeper needs Node ${REQUIRED_NODE_MAJOR} or later; this is Node ${version}. Run it through npm ` +
    `(npm start, npm test, npm run <script>): on Linux npm install fetches Node ${REQUIRED_NODE_MAJOR} and the ` +
    `scripts use it; elsewhere install Node ${REQUIRED_NODE_MAJOR} (https://nodejs.org).`
  );
}

const refusal = unsupportedNode(process.versions.node);
if (refusal) {
  process.stderr.write(`${refusal}\n`);
  process.exit(1);
}
