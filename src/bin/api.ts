/**
 * The admin API of one region (src/api/admin-server.ts): every operator verb over HTTPS, for callers with an OIDC
 * access token of the configured issuer.
 *
 *   HOLD_SWEEPER_MODE=production HOLD_SWEEPER_REGIONS=us TEMPORAL_ADDRESS=temporal:7233 \
 *   DATABASE_URL_US=postgres://hold_sweeper_ops@... PAYLOAD_KEYS_US=k1:<base64> MERCHANT_SECRET_KEYS_US=k1:<base64> \
 *   API_OIDC_ISSUER=https://login.example.com API_TLS_CERT_FILE=... API_TLS_KEY_FILE=... npm run api
 *
 * It holds the operators' database role and the payload and merchant-secret keys, so an operator's machine holds a
 * token only (`npm run ops` with HOLD_SWEEPER_API_URL_<R>). In dev mode, unset addresses are a running `npm start`'s.
 */
import '../node-version.js';
import { Client } from '@temporalio/client';
import { ENTRY_POINTS, loadApiConfig, loadConfig, requireExplicitMode } from '../config.js';
import { dataConverterFor } from '../codec/encryption-codec.js';
import { createPool } from '../db/pool.js';
import { localKeyRing } from '../delivery/secret-box.js';
import { ConfigError } from '../errors.js';
import { buildAdminServer } from '../api/admin-server.js';
import { createTokenVerifier } from '../api/identity.js';
import { serveUntilSignal, tlsOf } from '../api/serve.js';
import { exitOnFatal, nameProcess } from '../observability/logger.js';
import { Registry } from '../observability/metrics-listener.js';
import { addressesIn } from '../dev-stack.js';
import { keepApiKeyFresh, lazyClientConnection, PLAINTEXT } from '../temporal-connection.js';
import { ledgerReady } from '../workers/startup.js';

const log = nameProcess('admin-api');

async function main() {
  requireExplicitMode();
  const config = loadConfig(process.env, ENTRY_POINTS.api);
  const api = loadApiConfig(process.env, config);
  log.level = config.observability.logLevel.toLowerCase();
  const region = config.regions.find((r) => r.region === api.region)!;
  const up = region.region.toUpperCase();
  const { databaseUrl, temporalAddress } = (await addressesIn(config.mode))(region);
  if (!databaseUrl) throw new ConfigError(`DATABASE_URL_${up}`, undefined, 'a postgres:// URL for the operators’ role');
  if (!temporalAddress) throw new ConfigError(`TEMPORAL_ADDRESS_${up}`, undefined, 'host:port (or TEMPORAL_ADDRESS)');

  const secrets = { region: region.region, sealer: localKeyRing(region.secretKeys) };
  const pool = createPool(databaseUrl, { max: 8 });
  // Production: the operators' own role (not a superuser, not the owner) and the schema current.
  await ledgerReady(log, pool, config.mode, 'ops', region);
  const verifier = await createTokenVerifier(api);
  const connection = lazyClientConnection(region.temporal ?? PLAINTEXT, temporalAddress);
  const stopRefreshing = keepApiKeyFresh(region.temporal ?? PLAINTEXT, [connection], (err) =>
    log.warn({ error: err }, 'Temporal API key not refreshed'),
  );
  const client = new Client({ connection, namespace: region.namespace, dataConverter: dataConverterFor(region) });
  const https = await tlsOf(api);
  const metrics = new Registry();
  const app = await buildAdminServer({
    metrics,
    context: {
      region: { ...region, databaseUrl, temporalAddress },
      pool,
      client,
      fourEyes: config.decisions.fourEyes,
      webhooks: config.webhooks,
      secrets,
    },
    verifier,
    https,
    logger: log,
  });
  await serveUntilSignal(
    app,
    api,
    'admin API',
    { issuer: api.issuer, audience: api.audience },
    async () => {
      stopRefreshing();
      await connection.close();
      await pool.end();
    },
    { registry: metrics, service: 'admin-api' },
  );
}

main().catch((err) => exitOnFatal(err));
