-- A merchant API key that ends by itself: what a portal link carries (docs/webhooks.md#the-portal). An operator mints
-- one for a merchant (`merchant portal-link`); the merchant signs in to the portal with it and every call it makes is
-- audited under its id, as any key's. Past `expires_at` it is refused like a revoked key. NULL: a key that lives until
-- it is revoked.
ALTER TABLE merchant_api_keys ADD COLUMN expires_at timestamptz
  CONSTRAINT merchant_api_keys_expires_at_check CHECK (expires_at IS NULL OR expires_at > created_at);
