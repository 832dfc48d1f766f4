-- The ledger of one region, as release 1.0 starts it: merchants, the accounts and holds the sweep releases and the
-- append-only ledger of what moved, the webhooks that announce it, the budgets that pace them, the processor's events,
-- and the records of what operators, the admin API and merchants asked for.
--
-- Amounts are integer minor units (cents). Operator identities are compared by identity_key(), never by their text.
-- Service roles' privileges on all of this are in src/db/grants.sql.


-- Operator identity ---------------------------------------------------------------------------------------------------

-- The one comparison key of an operator identity: Unicode NFKC, surrounding whitespace removed, lower case (ICU's
-- root locale, whatever the database's own collation: `lower()` under a C collation leaves "Ä" alone). `alice`,
-- ` Alice ` and `ａｌｉｃｅ` (full width) are one person. src/contracts/identity.ts computes the same key for the
-- CLI and the activities (a test compares the two on tricky input). Every four-eyes check compares these keys: an
-- approver must be another person than the requester, not another spelling of them.
CREATE FUNCTION identity_key(who text) RETURNS text
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  RETURN lower(btrim(normalize(who, NFKC),
                     ' ' || chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || chr(133) || chr(5760) || chr(8232) || chr(8233) || chr(65279))
               COLLATE "und-x-icu");


-- Merchants -----------------------------------------------------------------------------------------------------------

-- A destination several merchants share, with the limits it publishes for all of them together: a platform that
-- receives webhooks for its merchants behind one endpoint and one limiter. A merchant that names one
-- (merchants.destination_id) is paced at the destination's rate, in one budget with every merchant naming it; every
-- other merchant is paced alone, at its own published rate. Merchants never share a budget by sharing a host: each
-- publishes its limits for its own endpoint, and one slow or busy merchant must not slow another.
CREATE TABLE destinations (
  id              text PRIMARY KEY,
  rate_per_second numeric NOT NULL CHECK (rate_per_second > 0),
  -- Requests open at once to the destination, all its merchants together (each merchant's own cap holds too); NULL:
  -- only the merchants' own caps.
  max_in_flight   integer CHECK (max_in_flight > 0),
  note            text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE merchants (
  id                      text PRIMARY KEY,
  name                    text NOT NULL,
  endpoint_url            text NOT NULL,
  -- Signing secrets are read only inside activities (never passed through Temporal); see invariant 7 in
  -- docs/invariants.md. Both hold `sealed:v<n>:<key id>:<ciphertext>` (src/delivery/secret-box.ts) or NULL: clear
  -- text is never written (merchants_signing_secrets_sealed), and migrate re-seals under the region's current key
  -- (src/db/secrets-at-rest.ts).
  signing_secret          text,
  previous_signing_secret text,
  -- The merchant's published rate. Its burst is never spent: sends are paced one emission interval apart, and the
  -- burst is left as headroom for the jitter between our admission and the merchant's receive (send_budgets).
  rate_per_second         numeric NOT NULL DEFAULT 5 CHECK (rate_per_second > 0),
  burst                   integer NOT NULL DEFAULT 1 CHECK (burst >= 0),
  status                  text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'disabled')),
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now(),
  -- Why and when sending stopped: paused by an operator, or disabled by a 410 Gone from the endpoint.
  disabled_reason         text,
  disabled_at             timestamptz,
  -- Overrides of the default delivery policy, e.g. {"initialBackoffMs": 1000, "retryHorizonMs": 86400000};
  -- validated by src/delivery/policy.ts, which names the bad key if one is wrong.
  delivery_policy         jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- `npm run ops -- merchant rotate-secret` moves the current secret to previous_signing_secret and sets this to when
  -- the overlap ends: until then every webhook is signed with both (the merchant verifies with whichever it has),
  -- after it with the new one only. NULL: the previous secret signs until replaced.
  previous_signing_secret_until timestamptz,
  -- A declared shared destination whose rate and budget this merchant's sends share; NULL: its own.
  destination_id          text REFERENCES destinations (id),
  CONSTRAINT merchants_signing_secrets_sealed CHECK (
    (signing_secret IS NULL OR signing_secret ~ '^sealed:v[0-9]+:[A-Za-z0-9_.-]+:')
    AND (previous_signing_secret IS NULL OR previous_signing_secret ~ '^sealed:v[0-9]+:[A-Za-z0-9_.-]+:')
  )
);

-- A shared destination's requests in flight are counted over its merchants.
CREATE INDEX merchants_destination ON merchants (destination_id) WHERE destination_id IS NOT NULL;


-- Ledger: accounts, holds, entries, sweeps ----------------------------------------------------------------------------

CREATE TABLE accounts (
  id              text PRIMARY KEY,
  currency        char(3) NOT NULL,
  available_minor bigint NOT NULL,
  held_minor      bigint NOT NULL CHECK (held_minor >= 0),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Card-authorization holds. auth_holds is written by the upstream authorisation system, so it deliberately has no
-- foreign keys or amount check: this service must survive whatever lands there. A row that cannot be released is
-- marked 'rejected' with a reason at sweep time instead of blocking the sweep.
--
-- The race between the sweep and the processor's events (processor_events) is decided by the hold's row lock and its
-- state, in one place: the release and every event application lock the row FOR UPDATE first. released, rejected,
-- captured and reversed are final: a capture or reversal of an active hold takes it out of `active` for good, so the
-- sweep's guarded transition (active -> released) can no longer happen; a capture that finds the hold already
-- released posts as a `late_capture` against the available balance and is flagged for review (ledger_reviews).
CREATE TABLE auth_holds (
  id              text PRIMARY KEY,
  account_id      text NOT NULL,
  merchant_id     text NOT NULL,
  amount_minor    bigint NOT NULL,
  currency        text NOT NULL,
  state           text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'released', 'rejected', 'captured', 'reversed')),
  expires_at      timestamptz NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  released_at     timestamptz,
  ledger_entry_id bigint,
  reject_code     text,
  rejected_at     timestamptz,
  -- The last processor sequence applied to this hold (0: none yet); an event applies only as event_seq + 1, under the
  -- row lock.
  event_seq       integer NOT NULL DEFAULT 0 CHECK (event_seq >= 0),
  settled_at      timestamptz,
  CHECK ((state = 'released') = (released_at IS NOT NULL AND ledger_entry_id IS NOT NULL)),
  CHECK ((state = 'rejected') = (reject_code IS NOT NULL)),
  CONSTRAINT auth_holds_settled CHECK ((state IN ('captured', 'reversed')) = (settled_at IS NOT NULL))
);

-- The sweep's keyset pagination and the "oldest expired but unreleased hold" age both read this index.
CREATE INDEX auth_holds_active_by_expiry ON auth_holds (expires_at, id) WHERE state = 'active';

-- What moved, one row per movement, never changed. Each kind's effect on the account:
--   hold_release    held -= hold amount, available += hold amount                     (the sweep's)
--   hold_capture    held -= hold amount, available += hold amount - captured amount   (money leaves: captured)
--   hold_reversal   held -= hold amount, available += hold amount                     (like a release)
--   hold_increment  held += increment,   available -= increment                       (the hold grows)
--   late_capture    available -= captured amount                                       (after the release)
CREATE TABLE ledger_entries (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- 'hold-release:<hold id>': the database, not the workflow, is the last word on "released once".
  idempotency_key text NOT NULL UNIQUE,
  kind            text NOT NULL CHECK (kind IN ('hold_release', 'hold_capture', 'hold_reversal', 'hold_increment', 'late_capture')),
  account_id      text NOT NULL REFERENCES accounts (id),
  hold_id         text NOT NULL REFERENCES auth_holds (id),
  amount_minor    bigint NOT NULL CHECK (amount_minor > 0),
  currency        char(3) NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  -- An event application writes at most one entry, keyed by the processor's event id (unique: applied once).
  processor_event_id text UNIQUE,
  CONSTRAINT ledger_entries_event_kinds CHECK ((kind = 'hold_release') = (processor_event_id IS NULL))
);

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger_entries is append-only: % is not allowed', TG_OP;
END;
$$;

CREATE TRIGGER ledger_entries_append_only
  BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();

-- One row per sweep (its workflow id): what it found and did, kept for operators and for the no-loss check.
CREATE TABLE sweep_runs (
  sweep_id          text PRIMARY KEY,
  -- Bounded by the ledger's clock (src/sql/holds.ts writes least(cutoff, now())): no caller can record a cutoff
  -- ahead of the ledger, and a later sweep's `left_active` reads max(cutoff).
  cutoff            timestamptz NOT NULL,
  pages             integer NOT NULL,
  found             integer NOT NULL,
  started           integer NOT NULL,
  already_started   integer NOT NULL,
  rejected          integer NOT NULL,
  unreleased_at_end integer NOT NULL,
  finished_at       timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT sweep_runs_cutoff_not_after_finish CHECK (cutoff <= finished_at)
);


-- Webhook deliveries --------------------------------------------------------------------------------------------------

-- The webhooks a hold's release and its processor events must send. A row is written in the same transaction as the
-- ledger change it announces (an outbox): no webhook can exist for a change that did not commit, and the payload,
-- fixed then, never changes across attempts.
--
-- A hold has one webhook per event it tells the merchant of (its release, then each applied processor event),
-- numbered per hold in the order they were written (under the hold's row lock). The send gate sends one only after
-- every earlier one of its hold has left `pending`: the merchant hears of a hold's events in order.
CREATE TABLE webhook_deliveries (
  webhook_id        text PRIMARY KEY,
  hold_id           text NOT NULL REFERENCES auth_holds (id),
  merchant_id       text NOT NULL,
  event_type        text NOT NULL,
  -- The exact bytes that are signed and sent on every attempt and replay.
  payload           text NOT NULL,
  status            text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'quarantined', 'discarded', 'abandoned')),
  attempt_count     integer NOT NULL DEFAULT 0,
  last_status_code  integer,
  last_error        text,
  quarantine_reason text CHECK (quarantine_reason IN ('rejected', 'exhausted', 'endpoint_gone', 'bad_url', 'missing_secret', 'invalid_policy')),
  created_at        timestamptz NOT NULL DEFAULT now(),
  updated_at        timestamptz NOT NULL DEFAULT now(),
  delivered_at      timestamptz,
  quarantined_at    timestamptz,
  hold_ordinal      integer NOT NULL CHECK (hold_ordinal > 0),
  -- Until when its workflow waits before it comes back to it (a wait for the budget, for room in flight, behind an
  -- earlier webhook, a held merchant's re-check, a retry's delay), as the delivery activity answered it: the outbox
  -- reconciler leaves a pending row alone until then (and its grace after), since a running workflow drives it.
  awaited_until     timestamptz,
  -- A quarantined row says why; the reason is kept when a human discards it or nobody decides (abandoned).
  CHECK (status <> 'quarantined' OR quarantine_reason IS NOT NULL),
  CHECK ((status = 'delivered') = (delivered_at IS NOT NULL))
);

CREATE UNIQUE INDEX webhook_deliveries_hold_ordinal ON webhook_deliveries (hold_id, hold_ordinal);
-- One release webhook per hold.
CREATE UNIQUE INDEX webhook_deliveries_release ON webhook_deliveries (hold_id) WHERE event_type = 'hold.released';
-- "Oldest undelivered webhook" and the per-merchant backlog both read pending rows by age.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (merchant_id, created_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_quarantined ON webhook_deliveries (merchant_id, quarantined_at) WHERE status = 'quarantined';

-- Every HTTP attempt at sending a webhook.
CREATE TABLE delivery_attempts (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  webhook_id         text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  -- 1, 2, 3... across the whole life of the webhook, replays included.
  attempt_number     integer NOT NULL,
  -- 1 for the first policy run; each approved replay or resend starts a new one.
  policy_run         integer NOT NULL,
  -- When Temporal scheduled this attempt (after the previous one's retry delay), by the server's clock.
  scheduled_at       timestamptz NOT NULL,
  started_at         timestamptz NOT NULL,
  duration_ms        integer NOT NULL,
  status_code        integer,
  -- For attempts without an HTTP status: ConnectionError, AttemptTimeout, ...
  error_class        text,
  response_excerpt   text,
  -- delivered | retry | quarantine
  outcome            text NOT NULL CHECK (outcome IN ('delivered', 'retry', 'quarantine')),
  next_retry_delay_ms bigint,
  -- Why that delay: "backoff attempt 3", "Retry-After 120 s (floor)", ...
  retry_reason       text,
  UNIQUE (webhook_id, attempt_number)
);

-- The workers' duplicate-ratio gauges (src/observability/metrics.ts) read the last 15 minutes of attempts on every
-- refresh; the attempt log only grows, so they read it by time.
CREATE INDEX delivery_attempts_started_at ON delivery_attempts (started_at);

-- Every human (or timeout) decision on a quarantined delivery, as the hold's workflow recorded it: who, why, under
-- which ticket.
CREATE TABLE delivery_decisions (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  webhook_id  text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  -- The policy run that ended in the quarantine being decided.
  policy_run  integer NOT NULL,
  decision    text NOT NULL CHECK (decision IN ('replay', 'discard', 'abandon')),
  decided_by  text NOT NULL,
  reason      text NOT NULL,
  ticket      text,
  decided_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (webhook_id, policy_run)
);


-- Send budgets: pacing and requests in flight -------------------------------------------------------------------------

-- One sending budget (GCRA) per merchant, or per declared destination for the merchants that name one, used by every
-- worker process: its key is 'merchant:<id>' or 'destination:<id>' (budget_key). A row is made by its first admission.
--
-- GCRA keeps a theoretical arrival time per clock, and there are two:
--   * the queue (`tat`) orders waiting deliveries: a caller reserves its place and sleeps to it (a durable timer when
--     far off) instead of polling; lanes decide how far ahead each kind of caller may reserve;
--   * the gate (`gate_tat`) admits actual sends, now or never: a caller woken late by its timer is spaced out again
--     here, so lateness can never bunch sends into one receiver-side second, and a 429 pause is checked in the same
--     locked step as the send is admitted.
-- `paused_until` is how a 429 (or a 503 with Retry-After) pushes the budget back: no place is handed out, and no
-- reserved place is used, before it.
CREATE TABLE send_budgets (
  key          text PRIMARY KEY,
  tat          timestamptz NOT NULL DEFAULT '-infinity',
  gate_tat     timestamptz NOT NULL DEFAULT '-infinity',
  paused_until timestamptz NOT NULL DEFAULT '-infinity',
  pause_reason text
);

-- The budget a merchant's sends are paced in, and the rate it is paced at.
CREATE FUNCTION budget_of(merchant text, OUT key text, OUT rate numeric, OUT destination text, OUT destination_cap integer)
LANGUAGE sql STABLE AS $$
  SELECT coalesce('destination:' || m.destination_id, 'merchant:' || m.id), coalesce(d.rate_per_second, m.rate_per_second),
         m.destination_id, d.max_in_flight
    FROM merchants m LEFT JOIN destinations d ON d.id = m.destination_id
   WHERE m.id = merchant
$$;

-- Requests in flight, across every worker. The rate limit bounds how often requests start, not how many are open:
-- against a merchant that hangs, every admitted attempt stays open until its timeout. An attempt holds a lease from its
-- admission at the gate (admit_attempt) until its attempt is recorded: at most the merchant's cap at once
-- (WEBHOOK_MAX_IN_FLIGHT_PER_MERCHANT, or its policy's), at most a shared destination's own cap over its merchants,
-- and never two for one webhook. A lease is its attempt's (`attempt_number`): only that attempt gives it back, so a
-- late return by an attempt given up on cannot free the lease of the one after it. It ends on its own at `expires_at`
-- (the longest its attempt can run): a worker killed mid-request never gives it back.
CREATE TABLE merchant_requests_in_flight (
  webhook_id     text PRIMARY KEY,
  merchant_id    text NOT NULL REFERENCES merchants (id),
  expires_at     timestamptz NOT NULL,
  attempt_number integer NOT NULL
);
CREATE INDEX merchant_requests_in_flight_merchant ON merchant_requests_in_flight (merchant_id, expires_at);

-- Room for one more request in flight: under the merchant's cap, under its shared destination's (if it names one
-- with a cap), and none open for this webhook.
CREATE FUNCTION room_in_flight(merchant text, destination text, cap integer, destination_cap integer, webhook text,
                               now_ts timestamptz) RETURNS boolean
  LANGUAGE sql STABLE
  RETURN (SELECT count(*) FROM merchant_requests_in_flight f WHERE f.merchant_id = merchant AND f.expires_at > now_ts) < cap
     AND (destination_cap IS NULL
          OR (SELECT count(*) FROM merchant_requests_in_flight f JOIN merchants o ON o.id = f.merchant_id
               WHERE o.destination_id = destination AND f.expires_at > now_ts) < destination_cap)
     AND NOT EXISTS (SELECT 1 FROM merchant_requests_in_flight f WHERE f.webhook_id = webhook AND f.expires_at > now_ts);

-- One call admits an attempt: it checks the room for a request in flight, locks the budget's row once, takes the place
-- in the queue and the gate in one update, and takes the lease. The worker composes it with the attempt's count and
-- the send pause (src/sql/merchant-budget.ts). Decisions, in this order: room first (busy: nothing reserved), then the
-- queue (denied / wait) and the gate (wait / send).
--
-- outcome: 'send' (admitted now), 'wait' (come back at `at` holding the queue place: reserved = true), 'denied'
-- (nothing reserved; this lane's place in the queue would be `at`), or 'busy' (no room in flight; nothing reserved).
-- webhook, cap and lease_ms NULL: no room check and no lease (a call that holds none, such as `merchant ping`).
--
-- Room is checked first without the budget's lock: a delivery that finds none waits (backing off in its workflow),
-- and polling for room never queues behind the sends of the budget it waits for. It is checked again under the lock,
-- where the budget's admissions are one at a time, so no cap is ever exceeded.
--
-- Sends go one emission interval apart, never in a burst. `margin` stretches the interval (0.1 = 10 % slower than the
-- published rate) so that network jitter between our send and the merchant's receive cannot bunch them. Evenly
-- paced, rate + burst + 1 sends span (rate + burst) × (1 + margin) / rate seconds: 320 ms of headroom at 5 req/s
-- burst 1, 1.2 s at 1 req/s burst 1, 122 ms at 50 req/s burst 1, against up to 134 ms measured between admission and
-- receive when a sweep starts 200 children at once on a 2-core machine. (b + 1 sends at once from idle would leave
-- only `margin` seconds.) The long-run rate is rate / (1 + margin).
CREATE FUNCTION admit_attempt(merchant text, lane_horizon_ms double precision, margin double precision, reserved boolean,
                              webhook text, cap integer, lease_ms double precision)
RETURNS TABLE (outcome text, at timestamptz, db_now timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  budget    record;
  emission  interval;
  limits    send_budgets%ROWTYPE;
  slot      timestamptz;
  tat_after timestamptz;
  now_ts    timestamptz;
BEGIN
  SELECT * INTO budget FROM budget_of(merchant);
  IF budget.key IS NULL THEN
    RAISE EXCEPTION 'merchant % does not exist', merchant;
  END IF;
  emission := make_interval(secs => (1 + margin) / budget.rate);
  IF cap IS NOT NULL
     AND NOT room_in_flight(merchant, budget.destination, cap, budget.destination_cap, webhook, clock_timestamp()) THEN
    RETURN QUERY SELECT 'busy'::text, clock_timestamp(), clock_timestamp();
    RETURN;
  END IF;
  SELECT * INTO limits FROM send_budgets b WHERE b.key = budget.key FOR UPDATE;
  IF NOT FOUND THEN
    INSERT INTO send_budgets (key) VALUES (budget.key) ON CONFLICT DO NOTHING;
    SELECT * INTO limits FROM send_budgets b WHERE b.key = budget.key FOR UPDATE;
  END IF;
  -- Read the clock after the lock: time spent queueing behind other acquirers must not count as waited.
  now_ts := clock_timestamp();
  IF cap IS NOT NULL AND NOT room_in_flight(merchant, budget.destination, cap, budget.destination_cap, webhook, now_ts) THEN
    RETURN QUERY SELECT 'busy'::text, now_ts, now_ts;
    RETURN;
  END IF;

  tat_after := limits.tat;
  IF NOT reserved THEN
    slot := greatest(limits.tat, limits.paused_until, now_ts);
    IF slot - now_ts > make_interval(secs => lane_horizon_ms / 1000) THEN
      RETURN QUERY SELECT 'denied'::text, slot, now_ts;
      RETURN;
    END IF;
    tat_after := slot + emission;
    IF slot > now_ts THEN
      UPDATE send_budgets b SET tat = tat_after WHERE b.key = budget.key;
      RETURN QUERY SELECT 'wait'::text, slot, now_ts;
      RETURN;
    END IF;
  END IF;

  slot := greatest(limits.gate_tat, limits.paused_until, now_ts);
  IF slot > now_ts THEN
    IF NOT reserved THEN
      UPDATE send_budgets b SET tat = tat_after WHERE b.key = budget.key;
    END IF;
    RETURN QUERY SELECT 'wait'::text, slot, now_ts;
    RETURN;
  END IF;
  UPDATE send_budgets b SET tat = tat_after, gate_tat = now_ts + emission WHERE b.key = budget.key;
  IF cap IS NOT NULL THEN
    -- The lease is the attempt's that the same statement counts (src/sql/deliveries.ts, attemptCountedOnAdmission).
    INSERT INTO merchant_requests_in_flight (webhook_id, merchant_id, expires_at, attempt_number)
    SELECT webhook, merchant, now_ts + make_interval(secs => lease_ms / 1000), d.attempt_count + 1
      FROM webhook_deliveries d WHERE d.webhook_id = webhook
    ON CONFLICT (webhook_id) DO UPDATE SET expires_at = excluded.expires_at, attempt_number = excluded.attempt_number;
  END IF;
  RETURN QUERY SELECT 'send'::text, now_ts, now_ts;
END;
$$;


-- Send pauses ---------------------------------------------------------------------------------------------------------

-- The region's big red button: while a pause is open (resumed_at NULL), no webhook of the region is admitted to its
-- budget (src/sql/merchant-budget.ts checks in the admission's own statement), so nothing is sent;
-- every delivery waits, held, durable, no attempt spent, and releases go on. `npm run ops -- sends pause|resume`
-- writes it (src/operations/send-pauses.ts); each row is one pause, who opened and closed it, and why.
CREATE TABLE send_pauses (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  paused_at     timestamptz NOT NULL DEFAULT now(),
  paused_by     text NOT NULL CHECK (btrim(paused_by) <> ''),
  reason        text NOT NULL CHECK (btrim(reason) <> ''),
  resumed_at    timestamptz,
  resumed_by    text,
  resume_reason text,
  CHECK ((resumed_at IS NULL) = (resumed_by IS NULL)),
  CHECK (resumed_by IS NULL OR (btrim(resumed_by) <> '' AND btrim(resume_reason) <> ''))
);
-- At most one pause open at a time.
CREATE UNIQUE INDEX send_pauses_one_open ON send_pauses ((true)) WHERE resumed_at IS NULL;


-- Replay and bulk resend requests -------------------------------------------------------------------------------------

-- Approval-gated bulk replay and bulk resend. A preview freezes the deliveries matching its filters into a request:
-- quarantined ones (kind 'replay'), or ones that reached an end (kind 'resend', each with its policy run). An approval
-- by another person than the requester (by identity_key) replays or resends exactly that frozen set, never what
-- happens to match the filters later.
CREATE TABLE replay_requests (
  id           text PRIMARY KEY,
  requested_by text NOT NULL,
  filters      jsonb NOT NULL,
  item_count   integer NOT NULL,
  status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved')),
  approved_by  text,
  approved_at  timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  kind         text NOT NULL DEFAULT 'replay' CHECK (kind IN ('replay', 'resend')),
  CHECK ((status = 'approved') = (approved_by IS NOT NULL)),
  CONSTRAINT replay_requests_four_eyes CHECK (approved_by IS NULL OR identity_key(approved_by) <> identity_key(requested_by))
);

CREATE TABLE replay_request_items (
  request_id  text NOT NULL REFERENCES replay_requests (id),
  webhook_id  text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  -- The policy run that was quarantined when the preview froze it: approving replays that run, no other.
  policy_run  integer NOT NULL,
  -- applied | ignored (no longer quarantined by the time of the approval) | failed
  outcome     text,
  signalled_at timestamptz,
  PRIMARY KEY (request_id, webhook_id)
);


-- Operator decisions --------------------------------------------------------------------------------------------------

-- A decision on a quarantined webhook (approveReplay, discard) is made in the ledger before it is sent: a row here
-- names the webhook, the quarantined policy run, the decision and who made it (the admin API writes the verified
-- subject; the break-glass CLI the name typed), and the Workflow Update sent to the hold's workflow carries its id. The
-- worker records a decision only when such a row (or, for a replay, an approved replay request covering the run) names
-- the same webhook, run, decision and person, and records it as the row says (src/sql/deliveries.ts,
-- decideQuarantine): a payload lifted from another workflow's history, or minted without a row, moves nothing.
--
-- The row then keeps what the workflow answered: 'sent' until it answers, 'applied' once it recorded the decision
-- (detail holds its answer), or 'ignored' and why. A decision never sent (the ledger showed the webhook no longer
-- waiting) is logged with its outcome and no decision_id or policy_run: it decides nothing.
CREATE TABLE operator_decisions (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  webhook_id  text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  signal      text NOT NULL CHECK (signal IN ('approveReplay', 'discard')),
  sent_by     text NOT NULL,
  reason      text NOT NULL,
  outcome     text NOT NULL CHECK (outcome IN ('sent', 'applied', 'ignored')),
  detail      text,
  sent_at     timestamptz NOT NULL DEFAULT now(),
  decision_id text UNIQUE CHECK (decision_id ~ '^dc_[0-9a-f]{32}$'),
  policy_run  integer CHECK (policy_run >= 1),
  ticket      text,
  CONSTRAINT operator_decisions_bound CHECK ((decision_id IS NULL) = (policy_run IS NULL))
);


-- Resends -------------------------------------------------------------------------------------------------------------

-- A webhook that reached an end (delivered, discarded, abandoned) may be sent again, with its original id and payload
-- and a fresh signature (a merchant lost it; nobody decided its quarantine in time). Each resend is a new policy run of
-- the same row, delivered by a workflow of its own (`resendWebhook`, id hold-resend-<region>-<resend id>): its first
-- activity records the resend here and moves the row back to pending, in one statement (src/sql/deliveries.ts,
-- `reopenForResend`), so a resend exists if and only if its row was reopened.
CREATE TABLE webhook_resends (
  id             text PRIMARY KEY,
  webhook_id     text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  -- The policy run this resend starts (1 + replays + resends before it): the replay lane, its own attempts.
  policy_run     integer NOT NULL CHECK (policy_run > 1),
  -- Where the webhook stood when it was reopened, and when it had been delivered (a reopened row forgets it).
  from_status    text NOT NULL CHECK (from_status IN ('delivered', 'discarded', 'abandoned')),
  from_delivered_at timestamptz,
  requested_by   text NOT NULL CHECK (btrim(requested_by) <> ''),
  reason         text NOT NULL CHECK (btrim(reason) <> ''),
  ticket         text,
  -- A bulk resend (and every resend where four eyes rule) carries out an approved request (replay_requests, kind
  -- 'resend'), approved by another person than its requester.
  request_id     text REFERENCES replay_requests (id),
  approved_by    text,
  -- The workflow that delivers this run (and any replay of it): approvals, discards and the outbox reconciler find it
  -- here.
  workflow_id    text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now(),
  UNIQUE (webhook_id, policy_run),
  CHECK ((request_id IS NULL) = (approved_by IS NULL)),
  CHECK (approved_by IS NULL OR identity_key(approved_by) <> identity_key(requested_by))
);
CREATE INDEX webhook_resends_request ON webhook_resends (request_id, webhook_id) WHERE request_id IS NOT NULL;


-- Outbox reconciler ---------------------------------------------------------------------------------------------------

-- The outbox reconciler (src/activities/outbox.ts, on its own schedule per region): a pending webhook is delivered
-- only by its workflow (a hold's release, an event's delivery, a resend); one whose workflow ended without finishing
-- it (terminated, timed out) would stay pending forever. The reconciler pages through pending webhooks oldest first,
-- whatever their merchant (this index; webhook_deliveries_pending is per merchant), and starts the delivery of each
-- that nothing drives.
CREATE INDEX webhook_deliveries_pending_by_age ON webhook_deliveries (created_at, webhook_id) WHERE status = 'pending';

-- Each reconcile run's account, written by its activity: what it looked at, restarted, and could not fix. The
-- workers' gauges read the newest (hold_sweeper_outbox_unfixable_webhooks), whichever worker ran it.
CREATE TABLE outbox_reconciliations (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  finished_at timestamptz NOT NULL DEFAULT now(),
  grace_ms    bigint NOT NULL CHECK (grace_ms >= 0),
  checked     integer NOT NULL CHECK (checked >= 0),
  running     integer NOT NULL CHECK (running >= 0),
  restarted   integer NOT NULL CHECK (restarted >= 0),
  unfixable   integer NOT NULL CHECK (unfixable >= 0),
  -- The webhooks restarted and those not fixed (with why), as many as the report lists.
  details     jsonb NOT NULL
);


-- Processor events ----------------------------------------------------------------------------------------------------

-- The card processor's own events about a hold (captured, reversed, incremented), received by
-- `POST /processor/events` (src/processor/receiver.ts) and applied in each hold's sequence by its event workflow
-- (src/workflows/hold-events.ts, through applyProcessorEvent), under the hold's row lock (see auth_holds).
--
-- Every event the receiver accepted (verified, well-formed), recorded before it answered 2xx. event_id is the
-- processor's own id (the Standard Webhooks `webhook-id`): unique in the region forever, there is no window.
CREATE TABLE processor_events (
  event_id       text PRIMARY KEY,
  hold_id        text NOT NULL,
  -- The processor's per-hold sequence: 1, 2, 3... One event per (hold, sequence).
  sequence       integer NOT NULL CHECK (sequence > 0),
  event_type     text NOT NULL CHECK (event_type IN ('hold.captured', 'hold.reversed', 'hold.incremented')),
  -- Captured amount or increment (positive), in the hold's currency; NULL for a reversal.
  amount_minor   bigint CHECK (amount_minor > 0),
  currency       char(3),
  occurred_at    timestamptz NOT NULL,
  -- The exact body that was verified, and its digest (a retry of the same id must carry the same body).
  body           text NOT NULL,
  body_sha256    text NOT NULL,
  received_at    timestamptz NOT NULL DEFAULT now(),
  -- Handed to the hold's event workflow (signal-with-start); NULL until then, the relay's work list.
  dispatched_at  timestamptz,
  applied_at     timestamptz,
  -- captured | reversed | incremented | late_captured | ignored | skipped_over
  outcome        text CHECK (outcome IN ('captured', 'reversed', 'incremented', 'late_captured', 'ignored', 'skipped_over')),
  outcome_detail text,
  ledger_entry_id bigint REFERENCES ledger_entries (id),
  webhook_id     text,
  UNIQUE (hold_id, sequence),
  CHECK ((applied_at IS NULL) = (outcome IS NULL)),
  CHECK ((amount_minor IS NULL) = (event_type = 'hold.reversed'))
);

CREATE INDEX processor_events_undispatched ON processor_events (received_at) WHERE dispatched_at IS NULL;

-- Every request the receiver refused (4xx): unsigned, badly signed, stale, malformed, conflicting. Nothing of it
-- was applied; the row says why, with an excerpt of what came (never a secret: the receiver holds none of the
-- sender's, and signature headers are MACs).
CREATE TABLE processor_requests_refused (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  received_at  timestamptz NOT NULL DEFAULT now(),
  status_code  integer NOT NULL,
  error_code   text NOT NULL,
  message      text NOT NULL,
  event_id     text,
  body_excerpt text
);

-- A gap in a hold's sequence that a human closed: the missing sequence will not be waited for. An event that
-- arrives for it later is recorded and not applied (outcome skipped_over) and flagged for review.
CREATE TABLE processor_sequence_skips (
  hold_id    text NOT NULL,
  sequence   integer NOT NULL,
  skipped_by text NOT NULL,
  reason     text NOT NULL,
  skipped_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (hold_id, sequence)
);

-- A skip of a missing processor sequence in production: requested by one person, approved by another, then carried
-- out by the hold's event workflow (its activity checks the request here before it records the skip).
CREATE TABLE processor_skip_requests (
  id           text PRIMARY KEY,
  hold_id      text NOT NULL,
  sequence     integer NOT NULL CHECK (sequence >= 1),
  requested_by text NOT NULL,
  reason       text NOT NULL,
  status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved')),
  approved_by  text,
  approved_at  timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  CHECK ((status = 'approved') = (approved_by IS NOT NULL)),
  CONSTRAINT processor_skip_requests_four_eyes CHECK (approved_by IS NULL OR identity_key(approved_by) <> identity_key(requested_by))
);
CREATE INDEX processor_skip_requests_hold ON processor_skip_requests (hold_id, sequence);

-- What needs a human's eyes in the ledger: late captures, money-carrying events that could not apply, events that
-- arrived after their sequence was skipped. Append-only ledger entries cannot carry a mutable flag, so it is here.
CREATE TABLE ledger_reviews (
  event_id    text PRIMARY KEY REFERENCES processor_events (event_id),
  hold_id     text NOT NULL,
  reason      text NOT NULL,
  opened_at   timestamptz NOT NULL DEFAULT now(),
  resolved_by text,
  resolved_at timestamptz
);


-- API audit -----------------------------------------------------------------------------------------------------------

-- The audit of the admin API (src/api/admin-server.ts) and the merchant API (src/api/merchant-server.ts), as a record
-- of what was done and by whom, never of what anyone may send: a refusal before any identity (401, and the merchant
-- API's 429) is counted in metrics and logged by sample, not written here (src/api/refusals.ts); an authenticated
-- call is, allowed or refused, with the verified subject that made it.
--
-- A call whose whole effect is ledger rows writes its row in the same transaction (the call fails if it cannot). A call
-- that acts outside the ledger (Temporal, a merchant's endpoint) writes its row first, `started`, and fails before it
-- acts if it cannot; the row's outcome is then filled in, the one change a row may take. A row still `started` says the
-- action may have happened and its answer was never recorded.
--
-- Append-only: the APIs' roles may insert and read, nobody but the schema's owner may change a row, and a trigger
-- refuses even that (an audit an owner can quietly edit is not one).
CREATE TABLE api_audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  request_id text NOT NULL,
  -- The token's `sub`, verified; NULL when no token was verified (the call was refused as unauthenticated).
  subject text,
  roles text[] NOT NULL DEFAULT '{}',
  -- The verb, e.g. `replay.approve`, or `unknown` for a route the API does not have.
  verb text NOT NULL,
  method text NOT NULL,
  path text NOT NULL,
  -- What it acted on (a hold, webhook, merchant or request id), when the verb names one.
  target text,
  -- started (written before an action outside the ledger), ok (2xx), refused (401, 403), rejected (other 4xx: the
  -- input or the ledger said no), failed (5xx).
  outcome text NOT NULL CHECK (outcome IN ('started', 'ok', 'refused', 'rejected', 'failed')),
  status integer NOT NULL,
  -- The error's name and message when it did not succeed.
  detail text,
  -- What a caller sends is stored bounded (the API caps it; this is the guard).
  CONSTRAINT api_audit_path_bounded CHECK (length(path) <= 512),
  CONSTRAINT api_audit_detail_bounded CHECK (length(detail) <= 2000)
);

CREATE INDEX api_audit_at ON api_audit (at);
CREATE INDEX api_audit_subject ON api_audit (subject, at);

-- How long a row stays at least: 400 days, past the year (and the three months at hand) a payments team's audit rules
-- ask for (PCI DSS 10.5.1), so that a yearly review always finds its whole year. docs/security.md#the-audit.
CREATE FUNCTION api_audit_min_retention() RETURNS interval LANGUAGE sql IMMUTABLE AS $$ SELECT interval '400 days' $$;

-- Refuses every change but the two the audit allows: a `started` row's outcome filled in (nothing else of the row
-- changed), and a delete by prune_api_audit of a row past the retention.
CREATE FUNCTION api_audit_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.outcome = 'started' AND NEW.outcome <> 'started'
     AND (NEW.id, NEW.at, NEW.request_id, NEW.subject, NEW.roles, NEW.verb, NEW.method, NEW.path, NEW.target)
         IS NOT DISTINCT FROM (OLD.id, OLD.at, OLD.request_id, OLD.subject, OLD.roles, OLD.verb, OLD.method, OLD.path, OLD.target)
  THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'DELETE' AND current_setting('hold_sweeper.audit_prune', true) = 'on'
     AND OLD.at < now() - api_audit_min_retention() THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'api_audit is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER api_audit_append_only BEFORE UPDATE OR DELETE ON api_audit
  FOR EACH ROW EXECUTE FUNCTION api_audit_is_append_only();
CREATE TRIGGER api_audit_no_truncate BEFORE TRUNCATE ON api_audit
  FOR EACH STATEMENT EXECUTE FUNCTION api_audit_is_append_only();

-- The one way rows leave the audit: older than the retention, by a named person, and the pruning itself is a row.
CREATE FUNCTION prune_api_audit(older_than timestamptz, pruned_by text) RETURNS bigint
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
  pruned bigint;
BEGIN
  IF older_than > now() - api_audit_min_retention() THEN
    RAISE EXCEPTION 'api_audit keeps % at least: % is too recent', api_audit_min_retention(), older_than
      USING ERRCODE = 'check_violation';
  END IF;
  IF btrim(coalesce(pruned_by, '')) = '' THEN
    RAISE EXCEPTION 'a prune of api_audit names who prunes' USING ERRCODE = 'check_violation';
  END IF;
  PERFORM set_config('hold_sweeper.audit_prune', 'on', true);
  DELETE FROM api_audit WHERE at < older_than;
  GET DIAGNOSTICS pruned = ROW_COUNT;
  PERFORM set_config('hold_sweeper.audit_prune', 'off', true);
  INSERT INTO api_audit (request_id, subject, verb, method, path, outcome, status, detail)
  VALUES (gen_random_uuid()::text, pruned_by, 'audit.prune', 'SQL', 'prune_api_audit', 'ok', 200,
          format('%s rows written before %s deleted', pruned, older_than));
  RETURN pruned;
END
$$;
REVOKE ALL ON FUNCTION prune_api_audit(timestamptz, text) FROM PUBLIC;


-- Merchant API --------------------------------------------------------------------------------------------------------

-- The merchant API (src/api/merchant-server.ts): each merchant's API keys, and the resends merchants ask for.
--
-- A key is `hsk_<id>_<secret>`: the id is public (it names the key in logs and the audit), the secret is 32 random
-- bytes shown once when the key is made and stored here only as its SHA-256 (a key is high-entropy: a fast hash is
-- enough, and no stored value opens the API). A revoked key is kept, with who revoked it and when.
CREATE TABLE merchant_api_keys (
  id             text PRIMARY KEY CHECK (id ~ '^mk_[0-9a-f]{16}$'),
  merchant_id    text NOT NULL REFERENCES merchants (id),
  secret_sha256  bytea NOT NULL CHECK (octet_length(secret_sha256) = 32),
  label          text,
  -- Requests per second this key may make (its own budget, enforced by the API), and at once above it.
  rate_per_second numeric NOT NULL DEFAULT 5 CHECK (rate_per_second > 0),
  burst          integer NOT NULL DEFAULT 10 CHECK (burst >= 1),
  created_at     timestamptz NOT NULL DEFAULT now(),
  created_by     text NOT NULL CHECK (btrim(created_by) <> ''),
  revoked_at     timestamptz,
  revoked_by     text,
  last_used_at   timestamptz,
  CHECK ((revoked_at IS NULL) = (revoked_by IS NULL))
);
CREATE INDEX merchant_api_keys_merchant ON merchant_api_keys (merchant_id);

-- A revoked key stays revoked: its revocation (when, by whom) is written once and never changed or cleared, whoever
-- holds UPDATE on the table (the operators' role revokes keys; it must not be able to bring one back). A key that
-- should work again is a new key.
CREATE FUNCTION merchant_api_key_revocation_is_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.revoked_at IS NOT NULL
     AND (NEW.revoked_at, NEW.revoked_by) IS DISTINCT FROM (OLD.revoked_at, OLD.revoked_by) THEN
    RAISE EXCEPTION 'merchant API key % was revoked at % by %: a revocation is final (make a new key)',
      OLD.id, OLD.revoked_at, OLD.revoked_by USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER merchant_api_keys_revocation_final BEFORE UPDATE OF revoked_at, revoked_by ON merchant_api_keys
  FOR EACH ROW EXECUTE FUNCTION merchant_api_key_revocation_is_final();

-- A resend a merchant asked for, of one of its own webhooks at an end. The merchant API records it and nothing else
-- (it holds no Temporal access and no key); the worker's outbox reconciler starts its resend workflow (the replay
-- lane), whose first step checks this row (the webhook is this merchant's, the key was live when it asked).
CREATE TABLE merchant_resend_requests (
  id             text PRIMARY KEY CHECK (id ~ '^mr_[0-9a-f]{20}$'),
  merchant_id    text NOT NULL REFERENCES merchants (id),
  webhook_id     text NOT NULL REFERENCES webhook_deliveries (webhook_id),
  key_id         text NOT NULL REFERENCES merchant_api_keys (id),
  -- The resend it becomes (webhook_resends.id once the worker reopened the webhook).
  resend_id      text NOT NULL UNIQUE CHECK (resend_id ~ '^rs_[0-9a-f]{20}$'),
  requested_at   timestamptz NOT NULL DEFAULT now(),
  -- When the reconciler started its workflow (NULL: not yet).
  started_at     timestamptz
);
CREATE INDEX merchant_resend_requests_unstarted ON merchant_resend_requests (requested_at) WHERE started_at IS NULL;
CREATE INDEX merchant_resend_requests_merchant ON merchant_resend_requests (merchant_id, requested_at);
-- One waiting resend per webhook, by the database: the merchant API's "none waiting" check and its insert are one
-- statement, but two such statements at once could each see none waiting; the second insert conflicts instead.
CREATE UNIQUE INDEX merchant_resend_requests_one_waiting ON merchant_resend_requests (webhook_id) WHERE started_at IS NULL;
