-- Replays show only what the account could read then and can read now (issue 31).
--
-- A provider's replay (Last-Event-ID) used to match the open jobs' events of the last 24 hours
-- against its services and ZIPs as they are at the reconnect: a provider that added ZIPs got
-- the jobs written there before. It now replays a job's event only if it held the job's service
-- and ZIP since before the event was written, and only while it can still read the job (open,
-- or assigned to it). So each pair's rows keep when they were added (a PATCH keeps the rows it
-- leaves in place, with their time; NULL: never counted for a replay), and an open job's event
-- keeps its job's id.
--
-- The pairs held now count from the last event written before this migration: none of the
-- outbox's older events are replayed to them.
ALTER TABLE provider_services ADD COLUMN created_at BIGINT;
ALTER TABLE provider_zips ADD COLUMN created_at BIGINT;
UPDATE provider_services SET created_at = (SELECT COALESCE(MAX(created_at) + 1, 0) FROM events);
UPDATE provider_zips SET created_at = (SELECT COALESCE(MAX(created_at) + 1, 0) FROM events);
ALTER TABLE events ADD COLUMN match_job TEXT;
