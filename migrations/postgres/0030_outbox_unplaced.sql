-- The positioners find the rows without a position by an index of those alone (issue 36).
--
-- events_pos indexed every row, NULLs included, and an event's row gets its position by an
-- UPDATE: the NULL entry of every event ever written stayed in the index until a VACUUM, and
-- the positioning statement's bitmap scan read all of them and their heap pages (20,000 entries
-- and 850 pages, 17 ms of CPU, 20,000 events into a benchmark; under a GET /users/me flood on
-- the same cluster that became 0.3-1.9 s per round and a live-update p99 of seconds). Now the
-- positions' index holds positioned rows only, and a partial index by id holds the rows that
-- wait: read in id order by an index scan, which marks the entries of positioned rows dead as
-- it passes them, so a round reads what waits and little else.
CREATE UNIQUE INDEX events_pos_given ON events (pos) WHERE pos IS NOT NULL;
DROP INDEX events_pos;
ALTER INDEX events_pos_given RENAME TO events_pos;
CREATE INDEX events_unplaced ON events (id) WHERE pos IS NULL;
