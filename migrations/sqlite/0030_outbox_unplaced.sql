-- PostgreSQL's positioners find the rows without a position by an index of those alone
-- (migrations/postgres/0030). On SQLite an event's position is its id: nothing to change; the
-- version is kept in step with PostgreSQL's.
SELECT 1;
