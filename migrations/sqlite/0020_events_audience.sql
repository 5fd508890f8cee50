-- An event about an open job also reaches every provider who offers its service in its ZIP.
-- The pair is kept on the event and matched against provider_services and provider_zips when
-- the outbox is read (by the pump, and by a reconnecting provider's replay through the index
-- below), instead of one event_recipients row per matching provider written in the changing
-- transaction: in a ZIP with 64 providers that was 64 rows per quote, under the outbox's
-- ordering lock, and it made POST /quotes on PostgreSQL six times slower.
ALTER TABLE events ADD COLUMN match_service TEXT;
ALTER TABLE events ADD COLUMN match_zip TEXT;
CREATE INDEX events_match ON events (match_service, match_zip, id) WHERE match_service IS NOT NULL;
