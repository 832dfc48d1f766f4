-- The outbox reconciler (src/activities/outbox.ts, on its own schedule per region): a pending webhook is delivered
-- only by its workflow (a hold's release, or an event's delivery); one whose workflow ended without finishing it
-- (terminated, timed out) would stay pending forever. The reconciler pages through pending webhooks oldest first,
-- whatever their merchant (this index; 002's is per merchant), and starts the delivery of each that nothing drives.
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
