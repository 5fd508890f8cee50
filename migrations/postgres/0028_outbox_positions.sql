-- The outbox without a global lock (issue 36).
--
-- Ids were drawn under an advisory lock that every transaction emitting an event took just
-- before its commit, so that ids grew in commit order: those transactions committed one after
-- another, and POST /quotes fell to a quarter of its rate. An event is now written with no
-- position (pos NULL) and no lock; each instance's pump gives the committed rows their
-- positions afterwards, in one statement per batch, its transaction holding an advisory lock
-- that only the positioners (and an erasure's deletion of events) take. Positions are given in
-- the order the rows became visible (by id within one batch), each greater than every position
-- given before, so a reader that has seen position N never misses a smaller one. Streams and
-- replays read by position (the SSE id, Last-Event-ID); the id stays the internal key
-- (event_recipients, banners).
--
-- events_pos_seq holds the last position given: never a MAX(pos), which goes back when the
-- newest event is pruned or erased. Existing rows keep their ids as positions, so the apps'
-- Last-Event-IDs still replay.
ALTER TABLE events ADD COLUMN pos BIGINT;
UPDATE events SET pos = id;
CREATE UNIQUE INDEX events_pos ON events (pos); -- the readers' order, and the positioner's rows (pos IS NULL)
CREATE SEQUENCE events_pos_seq MINVALUE 0 START 0;
SELECT setval('events_pos_seq', GREATEST((SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM events_id_seq),
                                         (SELECT COALESCE(MAX(id), 0) FROM events)), true);
