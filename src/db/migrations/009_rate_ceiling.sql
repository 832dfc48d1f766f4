-- The pace a merchant may declare for itself (PUT /v1/endpoint/rate, docs/merchant-guide.md#7-declare-your-pace): any
-- rate and burst up to the ceiling its operators set (`merchant set --rate-ceiling --burst-ceiling`). The limiter reads
-- rate_per_second and burst at each admission, so a declared pace holds from the next request. An operator's own
-- `--rate` is not bound by the ceiling: the merchant's declarations are.
ALTER TABLE merchants
  ADD COLUMN rate_ceiling numeric NOT NULL DEFAULT 50 CONSTRAINT merchants_rate_ceiling_check CHECK (rate_ceiling > 0),
  ADD COLUMN burst_ceiling integer NOT NULL DEFAULT 50 CONSTRAINT merchants_burst_ceiling_check CHECK (burst_ceiling >= 1);
