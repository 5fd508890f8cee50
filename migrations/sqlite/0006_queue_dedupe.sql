-- Background work that must exist once however many instances queue it (periodic tasks: one
-- row per kind and time slot). NULL keys never collide.
ALTER TABLE job_queue ADD COLUMN dedupe_key TEXT;
CREATE UNIQUE INDEX job_queue_dedupe ON job_queue (dedupe_key);
