-- Idempotency keys (Idempotency-Key header): one row per (scope, key), where scope is the
-- account ("<role>:<id>") or, for open routes, the client address ("ip:<address>"). status and
-- response are NULL while the first request runs; the kept answer then lives until expires_at.
CREATE TABLE idempotency_keys (
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  request_hash TEXT NOT NULL,
  status INTEGER,
  response TEXT,
  locked_until BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
