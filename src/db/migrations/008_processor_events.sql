-- 008_processor_events: the card processor's own events about a hold (captured, reversed, incremented), received
-- by `POST /processor/events` (src/processor/receiver.ts) and applied in each hold's sequence by its event workflow
-- (src/workflows/hold-events.ts, through applyProcessorEvent).
--
-- The race with the sweep is decided by the hold's row lock and its state, in one place: the release and every
-- event application lock the auth_holds row FOR UPDATE first. A capture or reversal of an active hold takes it out
-- of `active` for good, so the sweep's guarded transition (active -> released) can no longer happen; a capture that
-- finds the hold already released posts as a `late_capture` against the available balance and is flagged for review.

-- captured and reversed are final, like released and rejected. event_seq: the last processor sequence applied to
-- this hold (0: none yet); an event applies only as event_seq + 1, under the row lock.
ALTER TABLE auth_holds DROP CONSTRAINT auth_holds_state_check;
ALTER TABLE auth_holds
  ADD CONSTRAINT auth_holds_state_check CHECK (state IN ('active', 'released', 'rejected', 'captured', 'reversed')),
  ADD COLUMN event_seq  integer NOT NULL DEFAULT 0 CHECK (event_seq >= 0),
  ADD COLUMN settled_at timestamptz,
  ADD CONSTRAINT auth_holds_settled CHECK ((state IN ('captured', 'reversed')) = (settled_at IS NOT NULL));

-- Each application writes at most one ledger entry, keyed by the processor's event id (unique: applied once).
--   hold_capture    held -= hold amount, available += hold amount - captured amount   (money leaves: captured)
--   hold_reversal   held -= hold amount, available += hold amount                     (like a release)
--   hold_increment  held += increment,   available -= increment                       (the hold grows)
--   late_capture    available -= captured amount                                       (after the release)
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_kind_check;
ALTER TABLE ledger_entries
  ADD CONSTRAINT ledger_entries_kind_check CHECK (kind IN ('hold_release', 'hold_capture', 'hold_reversal', 'hold_increment', 'late_capture')),
  ADD COLUMN processor_event_id text UNIQUE,
  ADD CONSTRAINT ledger_entries_event_kinds CHECK ((kind = 'hold_release') = (processor_event_id IS NULL));

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

-- Webhooks: a hold now has one per event it tells the merchant of (its release, then each applied processor event),
-- numbered per hold in the order they were written (under the hold's row lock). The send gate sends one only after
-- every earlier one of its hold has left `pending`: the merchant hears of a hold's events in order.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_hold_id_key;
ALTER TABLE webhook_deliveries ADD COLUMN hold_ordinal integer NOT NULL DEFAULT 1 CHECK (hold_ordinal > 0);
ALTER TABLE webhook_deliveries ALTER COLUMN hold_ordinal DROP DEFAULT;
CREATE UNIQUE INDEX webhook_deliveries_hold_ordinal ON webhook_deliveries (hold_id, hold_ordinal);
-- Still one release webhook per hold.
CREATE UNIQUE INDEX webhook_deliveries_release ON webhook_deliveries (hold_id) WHERE event_type = 'hold.released';
