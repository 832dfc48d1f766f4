-- The workers' duplicate-ratio gauges (src/observability/metrics.ts) read the last 15 minutes of attempts on every
-- refresh; the attempt log only grows, so they read it by time.
CREATE INDEX delivery_attempts_started_at ON delivery_attempts (started_at);
