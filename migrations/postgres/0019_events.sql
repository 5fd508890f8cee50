-- Live updates (issue 25): the events outbox, the recipients index, stream tickets.
--
-- Every event is a row written in the transaction of the change it tells of, so an event
-- exists exactly when its change committed. Ids grow in commit order (on SQLite every write
-- runs on the one writer connection, so ids are taken in commit order; on PostgreSQL the
-- outbox's writers take an advisory lock first), and a stream's Last-Event-ID is a position
-- in that order. Rows are kept 24 hours and a little more (the hourly events_prune task).
CREATE SEQUENCE events_id_seq;
CREATE TABLE events (
  id BIGINT PRIMARY KEY DEFAULT nextval('events_id_seq'),
  kind TEXT NOT NULL,
  data TEXT NOT NULL,      -- the event's JSON, as the REST route of its resource answers it
  created_at BIGINT NOT NULL
);
CREATE INDEX events_created ON events (created_at);

-- Who may read each event: "user:<id>", "provider:<id>", or "staff:<role>" (every staff member
-- of that role). A reconnecting stream reads its missed events through the first index.
CREATE TABLE event_recipients (
  recipient TEXT NOT NULL,
  event_id BIGINT NOT NULL,
  PRIMARY KEY (recipient, event_id)
);
CREATE INDEX event_recipients_event ON event_recipients (event_id);

-- POST /events/ticket: a single-use ticket (only its SHA-256 is kept) that opens one stream
-- for 60 seconds with the claims of the token it was issued for.
CREATE TABLE event_tickets (
  ticket_hash TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  role TEXT NOT NULL,
  is_staff INTEGER NOT NULL,
  elevation_id TEXT,
  gen BIGINT NOT NULL,
  token_exp BIGINT NOT NULL, -- the token's exp (epoch seconds): the stream ends then
  expires_at BIGINT NOT NULL,
  token_id TEXT NOT NULL -- the token's own id (logout ends its streams)
);
CREATE INDEX event_tickets_expiry ON event_tickets (expires_at);

-- The event that announced a pending banner: a stream that delivers it clears that banner (not
-- a newer one that replaced it).
ALTER TABLE banners ADD COLUMN event_id BIGINT;
