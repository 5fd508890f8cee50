-- When a job was completed: the 72-hour report window counts from it, so later changes to
-- the job (photos added afterwards) cannot reopen the window.
ALTER TABLE jobs ADD COLUMN completed_at BIGINT;
UPDATE jobs SET completed_at = updated_at WHERE status = 'COMPLETED';
