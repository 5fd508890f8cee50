-- The Job JSON of each job, written when the job changes (docs/internals/job-json.md): json_head
-- holds the members before the photo arrays, json_tail those after them; the signed photo URLs
-- and per-viewer members are added when a job is read. NULL: not written yet, or made stale by
-- a change that did not rewrite it (the trigger below); readers then render the row itself.
ALTER TABLE jobs ADD COLUMN json_head TEXT;
ALTER TABLE jobs ADD COLUMN json_tail TEXT;

-- The provider feed: the open jobs of one (service, ZIP) in feed order, with everything the
-- feed writes, so one range scan answers without a sort or a table lookup.
CREATE INDEX jobs_feed_open ON jobs (service, zip, feed_at, seq, id, json_head, json_tail, images, before_images,
  after_images) WHERE status IN ('PENDING', 'QUOTED');
-- A provider's own pending quotes (its quotes on open jobs), read once per feed; it also serves
-- every lookup by provider, so it replaces quotes_provider (one index less to write per quote).
CREATE INDEX quotes_provider_open ON quotes (provider_id, status, job_id);
DROP INDEX quotes_provider;

-- Any change to a member of the Job JSON by a statement that leaves both parts as they were (a
-- writer outside the jobs domain, an operator's UPDATE) leaves the JSON NULL.
CREATE TRIGGER jobs_json_stale AFTER UPDATE ON jobs
WHEN NEW.json_head IS NOT NULL AND NEW.json_head IS OLD.json_head AND NEW.json_tail IS OLD.json_tail AND (
  NEW.id IS NOT OLD.id OR NEW.customer_id IS NOT OLD.customer_id OR NEW.provider_id IS NOT OLD.provider_id OR
  NEW.service IS NOT OLD.service OR NEW.description IS NOT OLD.description OR
  NEW.preferred_at IS NOT OLD.preferred_at OR NEW.is_asap IS NOT OLD.is_asap OR NEW.details IS NOT OLD.details OR
  NEW.address IS NOT OLD.address OR NEW.zip IS NOT OLD.zip OR NEW.lat IS NOT OLD.lat OR NEW.lng IS NOT OLD.lng OR
  NEW.status IS NOT OLD.status OR NEW.tip_cents IS NOT OLD.tip_cents OR NEW.eta_minutes IS NOT OLD.eta_minutes OR
  NEW.created_at IS NOT OLD.created_at OR NEW.updated_at IS NOT OLD.updated_at)
BEGIN
  UPDATE jobs SET json_head = NULL, json_tail = NULL WHERE id = NEW.id;
END;
