-- Fewer index pages per write (issue 37; bench/wal_pages.sh names the B-trees each write
-- dirties). Each index now holds only the rows its one reader looks for, so a write of any
-- other row leaves it alone: the median of accepted quotes reads ACCEPTED quotes (a new quote
-- is PENDING); the provider's jobs name their provider (an open job has none); the queue's
-- dedupe keys are set for periodic work only (an email's row has none, and NULLs never
-- conflicted). Each is rebuilt in the migration's transaction.
DROP INDEX quotes_market;
CREATE INDEX quotes_market ON quotes (service, accepted_at) WHERE status = 'ACCEPTED';
DROP INDEX jobs_provider;
CREATE INDEX jobs_provider ON jobs (provider_id, status) WHERE provider_id IS NOT NULL;
DROP INDEX job_queue_dedupe;
CREATE UNIQUE INDEX job_queue_dedupe ON job_queue (dedupe_key) WHERE dedupe_key IS NOT NULL;
