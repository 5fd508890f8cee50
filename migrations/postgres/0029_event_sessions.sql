-- The live updates' browser session (issue 33): POST /events/session sets an HttpOnly cookie
-- scoped to /events that stands for the token that asked for it, so a browser's native
-- EventSource (withCredentials) reconnects on its own, across network drops and restarts, for
-- as long as that token is valid. Only the cookie's SHA-256 is kept, with the token's claims:
-- GET /events checks them as the token's own (its logout, its account's token generation, its
-- impersonation), and the row goes when the token expires.
CREATE TABLE event_sessions (
  session_hash TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  role TEXT NOT NULL,
  is_staff INTEGER NOT NULL,
  elevation_id TEXT,
  gen BIGINT NOT NULL,
  token_exp BIGINT NOT NULL, -- the token's exp (epoch seconds): the session ends then
  token_id TEXT NOT NULL
);
CREATE INDEX event_sessions_expiry ON event_sessions (token_exp);
CREATE INDEX event_sessions_account ON event_sessions (account_id);
