-- The outbox's positions (issue 36): streams and replays read events by position, the same
-- SQL on both engines. On PostgreSQL the pump gives positions after the commit
-- (migrations/postgres/0026); on SQLite the one writer commits in id order, and AUTOINCREMENT
-- never gives an id twice, so an event's position is its id.
ALTER TABLE events ADD COLUMN pos INTEGER GENERATED ALWAYS AS (id) VIRTUAL;
CREATE UNIQUE INDEX events_pos ON events (pos);
