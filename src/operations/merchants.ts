/**
 * Merchant endpoints, managed: what `npm run ops -- merchant add|show|set|pause|resume|rotate-secret|ping` runs,
 * and what the tests call directly. Every value is checked before anything is written, by the same code delivery
 * uses on it (the endpoint guard, the delivery policy, the secret's format), so a merchant the CLI accepted is one a
 * delivery can send to; a bad value is a named error (InvalidMerchantSetting, InvalidEndpointUrl,
 * InvalidDeliveryPolicyError) and nothing is written.
 *
 * A signing secret is generated here and returned once, to be handed to the merchant; it is never printed again
 * (`show` says only whether one is set), never logged, and never enters Temporal. It is sealed with the region's key
 * ring before it is written (src/delivery/secret-box.ts), and opened again only by `ping`, right before it signs.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import { MERCHANT_PING_EVENT } from '../contracts/delivery.js';
import { parseEndpoint, guardedLookup, type EndpointRules } from '../delivery/endpoint.js';
import { createAgents, sendWebhookRequest, type HttpAttempt } from '../delivery/http-sender.js';
import { classifyAttempt, parseRetryAfter, resolveDeliveryPolicy, type DeliveryAction } from '../delivery/policy.js';
import type { SecretsAtRest } from '../delivery/secret-box.js';
import { generateSigningSecret, openSigningKeys, signedHeaders } from '../delivery/standard-webhooks.js';
import { InvalidMerchantSetting, OperatorError } from '../errors.js';
import { createMerchantBudget, MAX_PUSHBACK_WITHOUT_RETRY_AFTER_MS } from '../sql/merchant-budget.js';
import * as merchants from '../sql/merchants.js';
import type { MerchantChanges as MerchantSettings, MerchantView } from '../sql/merchants.js';

/** Merchant ids go into workflow ids, search attributes and metric labels: short, plain, no spaces. */
const MERCHANT_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
/** Far above any merchant's published limit; a typo (5000 for 5) is refused rather than obeyed. */
const MAX_RATE_PER_SECOND = 1000;
const MAX_BURST = 1000;
/** How long a rotated-out secret signs alongside the new one unless the operator says otherwise. */
export const DEFAULT_ROTATION_OVERLAP_MS = 24 * 3_600_000;
export const MAX_ROTATION_OVERLAP_MS = 30 * 86_400_000;
/** How long a ping waits for its turn in the merchant's budget before it gives up. */
const PING_MAX_WAIT_MS = 10_000;

/** A declared destination's settings (`destination set`). */
interface DestinationSettings {
  id: string;
  ratePerSecond?: number;
  maxInFlight?: number | null;
  note?: string;
}

/** Checks every given setting as delivery will read it; throws the first that cannot be used. */
function checkMerchantSettings(merchantId: string, s: MerchantSettings, rules: EndpointRules): void {
  if (s.name !== undefined && !s.name.trim()) throw new InvalidMerchantSetting('name', s.name, 'a non-empty name');
  if (s.endpointUrl !== undefined) parseEndpoint(merchantId, s.endpointUrl, rules);
  if (
    s.ratePerSecond !== undefined &&
    !(Number.isFinite(s.ratePerSecond) && s.ratePerSecond > 0 && s.ratePerSecond <= MAX_RATE_PER_SECOND)
  ) {
    throw new InvalidMerchantSetting(
      'rate',
      s.ratePerSecond,
      `requests per second, > 0 and at most ${MAX_RATE_PER_SECOND}`,
    );
  }
  if (s.burst !== undefined && !(Number.isInteger(s.burst) && s.burst >= 0 && s.burst <= MAX_BURST)) {
    throw new InvalidMerchantSetting('burst', s.burst, `a whole number of requests, 0 to ${MAX_BURST}`);
  }
  if (
    s.rateCeiling !== undefined &&
    !(Number.isFinite(s.rateCeiling) && s.rateCeiling > 0 && s.rateCeiling <= MAX_RATE_PER_SECOND)
  ) {
    throw new InvalidMerchantSetting(
      'rate ceiling',
      s.rateCeiling,
      `requests per second, > 0 and at most ${MAX_RATE_PER_SECOND}`,
    );
  }
  if (
    s.burstCeiling !== undefined &&
    !(Number.isInteger(s.burstCeiling) && s.burstCeiling >= 1 && s.burstCeiling <= MAX_BURST)
  ) {
    throw new InvalidMerchantSetting('burst ceiling', s.burstCeiling, `a whole number of requests, 1 to ${MAX_BURST}`);
  }
  if (s.deliveryPolicy !== undefined) {
    if (typeof s.deliveryPolicy !== 'object' || s.deliveryPolicy === null || Array.isArray(s.deliveryPolicy)) {
      throw new InvalidMerchantSetting('delivery policy', s.deliveryPolicy, 'a JSON object of policy overrides');
    }
    resolveDeliveryPolicy(merchantId, s.deliveryPolicy);
  }
}

/** A named destination must be declared before a merchant names it. */
async function checkDestination(pool: Queryable, destinationId: string | null | undefined): Promise<void> {
  if (destinationId === undefined || destinationId === null) return;
  if (!(await merchants.destinationExists(pool, destinationId)))
    throw new InvalidMerchantSetting(
      'destination',
      destinationId,
      'a declared destination (`destination set <id> --rate R` first), or "none"',
    );
}

async function viewOf(pool: Queryable, merchantId: string): Promise<MerchantView> {
  const view = await merchants.merchantView(pool, merchantId);
  if (!view) throw new OperatorError('MerchantNotFound', `no merchant ${merchantId} in this region`);
  return view;
}

/** Adds a merchant with a new signing secret, returned here once and stored sealed with `secrets`. */
export async function addMerchant(
  pool: Queryable,
  rules: EndpointRules,
  secrets: SecretsAtRest,
  m: { id: string; name: string; endpointUrl: string } & Omit<MerchantSettings, 'name' | 'endpointUrl'>,
): Promise<{ merchant: MerchantView; signingSecret: string }> {
  if (!MERCHANT_ID.test(m.id))
    throw new InvalidMerchantSetting(
      'id',
      m.id,
      'letters, digits, _ . - (at most 64, starting with a letter or digit)',
    );
  // A setting given as undefined (an option the CLI did not get) takes its default.
  const given = Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) as typeof m;
  const settings = { ratePerSecond: 5, burst: 1, deliveryPolicy: {}, destinationId: null, ...given };
  checkMerchantSettings(m.id, settings, rules);
  await checkDestination(pool, settings.destinationId);
  const signingSecret = generateSigningSecret();
  const sealedSigningSecret = await secrets.sealer.seal(signingSecret, { region: secrets.region, merchantId: m.id });
  const added = await merchants.insertMerchant(pool, { ...settings, name: settings.name.trim(), sealedSigningSecret });
  if (!added)
    throw new OperatorError('MerchantExists', `merchant ${m.id} already exists; change it with \`merchant set\``);
  if (settings.rateCeiling !== undefined || settings.burstCeiling !== undefined)
    await merchants.updateMerchant(pool, m.id, {
      rateCeiling: settings.rateCeiling,
      burstCeiling: settings.burstCeiling,
    });
  return { merchant: await viewOf(pool, m.id), signingSecret };
}

export async function showMerchant(pool: Queryable, merchantId: string): Promise<MerchantView> {
  return viewOf(pool, merchantId);
}

/** Changes the given settings, checked first; the others stay as they are. */
export async function setMerchant(
  pool: Queryable,
  rules: EndpointRules,
  merchantId: string,
  changes: MerchantSettings,
): Promise<MerchantView> {
  if (Object.values(changes).every((v) => v === undefined)) {
    throw new InvalidMerchantSetting(
      'changes',
      changes,
      'at least one of --name, --url, --rate, --burst, --rate-ceiling, --burst-ceiling, --policy, --destination',
    );
  }
  checkMerchantSettings(merchantId, changes, rules);
  await checkDestination(pool, changes.destinationId);
  if (!(await merchants.updateMerchant(pool, merchantId, { ...changes, name: changes.name?.trim() })))
    await viewOf(pool, merchantId);
  return viewOf(pool, merchantId);
}

/**
 * Declares a destination several merchants share, with the rate it publishes for all of them (and its own cap on
 * requests open at once), or changes the given values of one. Merchants join it with `merchant set --destination`.
 */
export async function setDestination(pool: Queryable, d: DestinationSettings): Promise<merchants.Destination> {
  if (!MERCHANT_ID.test(d.id))
    throw new InvalidMerchantSetting('destination', d.id, 'letters, digits, _ . - (at most 64)');
  if (
    d.ratePerSecond !== undefined &&
    !(Number.isFinite(d.ratePerSecond) && d.ratePerSecond > 0 && d.ratePerSecond <= MAX_RATE_PER_SECOND)
  )
    throw new InvalidMerchantSetting(
      'rate',
      d.ratePerSecond,
      `requests per second, > 0 and at most ${MAX_RATE_PER_SECOND}`,
    );
  if (d.maxInFlight != null && !(Number.isInteger(d.maxInFlight) && d.maxInFlight > 0 && d.maxInFlight <= MAX_BURST))
    throw new InvalidMerchantSetting('max-in-flight', d.maxInFlight, `a whole number of requests, 1 to ${MAX_BURST}`);
  const existing = await merchants.destinationView(pool, d.id);
  if (!existing && d.ratePerSecond === undefined)
    throw new InvalidMerchantSetting('rate', undefined, 'the rate the destination publishes (a new destination)');
  await merchants.upsertDestination(pool, d);
  return (await merchants.destinationView(pool, d.id))!;
}

export async function showDestination(pool: Queryable, id: string): Promise<merchants.Destination> {
  const d = await merchants.destinationView(pool, id);
  if (!d) throw new OperatorError('DestinationNotFound', `no destination ${id} in this region`);
  return d;
}

/** Stops sending to the merchant; its webhooks wait, held, and go out after `resume`. */
export async function pauseMerchant(
  pool: Queryable,
  merchantId: string,
  reason: string,
): Promise<{ changed: boolean; merchant: MerchantView }> {
  if (!reason.trim()) throw new InvalidMerchantSetting('reason', reason, 'why sending stops, for the next operator');
  const changed = await merchants.pauseMerchant(pool, merchantId, reason.trim());
  return { changed, merchant: await viewOf(pool, merchantId) };
}

/** Sends again to a paused merchant, or to one disabled after a 410 Gone. */
export async function resumeMerchant(
  pool: Queryable,
  merchantId: string,
): Promise<{ changed: boolean; merchant: MerchantView }> {
  const changed = await merchants.resumeMerchant(pool, merchantId);
  return { changed, merchant: await viewOf(pool, merchantId) };
}

/**
 * A new signing secret, returned here once and stored sealed with `secrets`: it signs from now on, and the one it
 * replaces signs alongside it until the overlap ends (the merchant verifies with whichever it holds), then is erased.
 * A secret older than that is dropped. An operator asks for it (`merchant rotate-secret`), or the merchant through the
 * merchant API (src/workers/endpoint-checks.ts).
 */
export async function rotateSigningSecret(
  db: Queryable,
  secrets: SecretsAtRest,
  merchantId: string,
  overlapMs = DEFAULT_ROTATION_OVERLAP_MS,
): Promise<{
  merchant: MerchantView;
  signingSecret: string;
  secretId: string;
  createdAt: string;
  /** The secret that signs until the overlap ends; null when there was none. */
  previousSecretId: string | null;
  previousSignsUntil: string;
}> {
  if (!(Number.isInteger(overlapMs) && overlapMs >= 0 && overlapMs <= MAX_ROTATION_OVERLAP_MS)) {
    throw new InvalidMerchantSetting('overlap', overlapMs, 'a duration from 0s to 30d');
  }
  const signingSecret = generateSigningSecret();
  const secretId = `whs_${randomBytes(8).toString('hex')}`;
  const sealed = await secrets.sealer.seal(signingSecret, { region: secrets.region, merchantId });
  const rotated = await merchants.rotateSigningSecret(db, merchantId, sealed, secretId, overlapMs);
  if (!rotated) throw new OperatorError('MerchantNotFound', `no merchant ${merchantId} in this region`);
  return {
    merchant: await viewOf(db, merchantId),
    signingSecret,
    secretId,
    createdAt: rotated.createdAt,
    previousSecretId: rotated.previousId,
    previousSignsUntil: rotated.until,
  };
}

interface PingResult {
  merchantId: string;
  webhookId: string;
  url: string;
  /** Keys the request was signed with: 2 during a rotation's overlap. */
  signatures: number;
  /** How long the ping waited for its turn in the merchant's budget. */
  waitedMs: number;
  statusCode: number | null;
  errorClass: string | null;
  durationMs: number;
  responseExcerpt: string;
  /** What the delivery policy would do with this answer, and the rule that decided it. */
  policyAction: DeliveryAction;
  policyRule: string;
}

/**
 * Sends one signed `merchant.ping` event to the merchant's endpoint (or to `url`, one it is checking before it becomes
 * the endpoint: the merchant API's checks, src/workers/endpoint-checks.ts) as a delivery would: the same endpoint guard,
 * the merchant's policy (its attempt timeout), its current signing keys (opened with `secrets` right before signing,
 * as a delivery opens them), and a turn in its rate budget (the replay
 * lane: a ping never goes ahead of the merchant's backlog; it waits up to 10 s, then gives up with
 * MerchantBudgetBusy). A 429 pushes the merchant back for every worker, as it would for a delivery. Nothing else
 * is changed: a ping is not a webhook, and its answer disables or quarantines nothing.
 */
export async function pingMerchant(
  pool: pg.Pool,
  rules: EndpointRules,
  secrets: SecretsAtRest,
  merchantId: string,
  to?: string,
  clock: () => number = Date.now,
): Promise<PingResult> {
  const { region } = secrets;
  const m = await merchants.merchantForSending(pool, merchantId);
  if (!m) throw new OperatorError('MerchantNotFound', `no merchant ${merchantId} in this region`);
  const policy = resolveDeliveryPolicy(merchantId, m.deliveryPolicy);
  const url = parseEndpoint(merchantId, to ?? m.endpointUrl, rules);
  const keys = await openSigningKeys(secrets, merchantId, m.sealedSigningSecret, m.sealedPreviousSigningSecret);

  const budget = createMerchantBudget(pool);
  let waitedMs = 0;
  for (let reserved = false; ; reserved = true) {
    const turn = await budget.acquire(merchantId, 'replay', reserved);
    if (turn.outcome === 'send') break;
    if (turn.outcome === 'paused') {
      throw new OperatorError(
        'SendsPaused',
        `the region's sends are paused (npm run ops -- sends status): nothing is sent, a ping neither`,
      );
    }
    const waitMs = turn.atMs - turn.nowMs;
    if (turn.outcome === 'denied' || waitedMs + waitMs > PING_MAX_WAIT_MS) {
      throw new OperatorError(
        'MerchantBudgetBusy',
        `merchant ${merchantId}'s rate budget is taken by its backlog until ${new Date(turn.atMs).toISOString()}; ping again later`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, waitMs));
    waitedMs += waitMs;
  }

  const sentAt = clock();
  const webhookId = `ping_${merchantId}_${sentAt}`;
  const body = JSON.stringify({
    type: MERCHANT_PING_EVENT,
    timestamp: new Date(sentAt).toISOString(),
    data: { merchant_id: merchantId, region },
  });
  const agents = createAgents();
  let attempt: HttpAttempt;
  try {
    attempt = await sendWebhookRequest({
      url,
      body,
      headers: { ...signedHeaders(keys, webhookId, Math.floor(sentAt / 1000), body) },
      timeoutMs: policy.attemptTimeoutMs,
      lookup: guardedLookup(merchantId, rules),
      agents,
    });
  } finally {
    agents.http.destroy();
    agents.https.destroy();
  }
  const rule = classifyAttempt(attempt.result);
  const status = attempt.result.kind === 'response' ? attempt.result.status : null;
  if (status === 429) {
    const retryAfterMs =
      attempt.result.kind === 'response' ? parseRetryAfter(attempt.result.retryAfter, clock()) : undefined;
    const pushBackMs =
      retryAfterMs === undefined ? MAX_PUSHBACK_WITHOUT_RETRY_AFTER_MS : Math.min(retryAfterMs, policy.retryAfterCapMs);
    await budget.pushBack(merchantId, pushBackMs, `HTTP 429 on ping ${webhookId}`);
  }
  return {
    merchantId,
    webhookId,
    url: url.toString(),
    signatures: keys.length,
    waitedMs,
    statusCode: status,
    errorClass: attempt.result.kind === 'error' ? attempt.result.errorClass : null,
    durationMs: attempt.durationMs,
    responseExcerpt: (attempt.responseExcerpt ?? '').slice(0, 200),
    policyAction: rule.action,
    policyRule: rule.when,
  };
}
