-- Keyset pages (src/db/page.c) are ordered by (seq, id). With the indexes ending at seq, SQLite
-- sorted what it read in a temporary B-tree ("USE TEMP B-TREE FOR RIGHT PART OF ORDER BY"; for
-- a job's quotes, a whole sort): clearing it alone was 3.6% of a notifications page's CPU
-- (docs/performance.md, "The reads' pages"). Ending the indexes in id, the rows come in page
-- order and the first page-size of them are all that is read. Each is rebuilt in the
-- migration's transaction: on a large table, an upgrade's start waits for it.
DROP INDEX notifications_account;
CREATE INDEX notifications_account ON notifications (account_id, role, seq, id);
DROP INDEX messages_thread;
CREATE INDEX messages_thread ON messages (job_id, provider_id, seq, id);
DROP INDEX messages_provider;
CREATE INDEX messages_provider ON messages (provider_id, job_id, seq, id);
CREATE INDEX quotes_job ON quotes (job_id, seq, id);
