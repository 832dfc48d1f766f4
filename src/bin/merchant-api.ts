/**
 * The merchant API of one region (src/api/merchant-server.ts): internet-facing, on its own database role.
 *
 *   HOLD_SWEEPER_MODE=production HOLD_SWEEPER_REGIONS=us \
 *   DATABASE_URL_US=postgres://hold_sweeper_merchant_api@... MERCHANT_API_TLS_CERT_FILE=...
 *   MERCHANT_API_TLS_KEY_FILE=... \
 *   npm run merchant-api
 *
 * It holds no Temporal address, payload key or merchant secret: a resend a merchant asks for is started by the
 * workers' outbox reconciler. In dev mode, an unset database URL is a running `npm start`'s.
 */
import '../node-version.js';
import { ENTRY_POINTS, loadConfig, loadMerchantApiConfig, requireExplicitMode } from '../config.js';
import { createPool } from '../db/pool.js';
import { ConfigError } from '../errors.js';
import { buildMerchantServer } from '../api/merchant-server.js';
import { serveUntilSignal, tlsOf } from '../api/serve.js';
import { exitOnFatal, nameProcess } from '../observability/logger.js';
import { Registry } from '../observability/metrics-listener.js';
import { addressesIn } from '../dev-stack.js';
import { ledgerReady } from '../workers/startup.js';

const log = nameProcess('merchant-api');

async function main() {
  requireExplicitMode();
  const config = loadConfig(process.env, ENTRY_POINTS['merchant-api']);
  const listener = loadMerchantApiConfig(process.env, config);
  log.level = config.observability.logLevel.toLowerCase();
  const region = config.regions.find((r) => r.region === listener.region)!;
  const up = region.region.toUpperCase();
  const { databaseUrl } = (await addressesIn(config.mode))(region);
  if (!databaseUrl)
    throw new ConfigError(`DATABASE_URL_${up}`, undefined, 'a postgres:// URL for the merchant API’s role');
  const pool = createPool(databaseUrl, { max: 8 });
  await ledgerReady(log, pool, config.mode, 'merchantApi', region);
  const https = await tlsOf(listener);
  const metrics = new Registry();
  const app = await buildMerchantServer({
    region: region.region,
    metrics,
    pool,
    https,
    resendsStartWithinMs: config.outbox.intervalMs,
    endpointRules: config.webhooks,
    logger: log,
  });
  await serveUntilSignal(app, listener, 'merchant API', {}, () => pool.end(), {
    registry: metrics,
    service: 'merchant-api',
  });
}

main().catch((err) => exitOnFatal(err));
