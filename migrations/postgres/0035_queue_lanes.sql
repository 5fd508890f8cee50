-- Each row carries its kind's lane (0 general, 1 heavy: the document recognitions), written
-- when it is queued, and job_queue_ready leads with it after the status, so that each lane's
-- ready check and claim seek their own due rows. They walked every due row of the other lane
-- to find one of theirs: a backlog of emails (SMTP away) made every poll of the heavy lane
-- read all of it (docs/performance-history.md section 26).
ALTER TABLE job_queue ADD COLUMN lane INTEGER NOT NULL DEFAULT 0;
UPDATE job_queue SET lane = 1 WHERE kind IN ('licence_check', 'insurance_check');
DROP INDEX job_queue_ready;
CREATE INDEX job_queue_ready ON job_queue (status, lane, run_at);
