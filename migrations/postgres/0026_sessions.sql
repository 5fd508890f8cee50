-- Issue 33: sessions that last. Each login (or registration, or password change) of a customer or
-- provider opens a session: a family of refresh tokens, rotated by POST /auth/refresh. Only the
-- SHA-256 of a refresh token is kept.
--
-- refresh_families: one per login: its account (account_id, role) and the account's token
-- generation then (a password change or reset, logout-all or an erasure moves it on and so ends
-- the family); created_at is the login; expires_at the 90-day cap (created_at + 90 days), after
-- which nothing of the family is valid (the rows' retention); ended_at when it was ended (logout,
-- reuse of a refresh token, logout-all, a password change or reset).
CREATE TABLE refresh_families (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  role TEXT NOT NULL,
  token_gen BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  ended_at BIGINT
);
CREATE INDEX refresh_families_account ON refresh_families (account_id, role);
CREATE INDEX refresh_families_expiry ON refresh_families (expires_at);

-- refresh_tokens: each refresh token of a family, by the SHA-256 of its text, with the access
-- token issued with it (its jti and expiry: ending the family ends them); expires_at: 30 days
-- after its issue, never past its family's cap (the rows' retention); used_at once it was
-- exchanged (presented again: reuse, which ends the family).
CREATE TABLE refresh_tokens (
  token_hash TEXT PRIMARY KEY,
  family_id TEXT NOT NULL,
  access_token_id TEXT NOT NULL,
  access_expires_at BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  used_at BIGINT
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);
CREATE INDEX refresh_tokens_expiry ON refresh_tokens (expires_at);
