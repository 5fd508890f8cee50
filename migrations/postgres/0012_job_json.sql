-- The Job JSON of each job, written when the job changes (docs/internals/job-json.md): json_head
-- holds the members before the photo arrays, json_tail those after them; the signed photo URLs
-- and per-viewer members are added when a job is read. NULL: not written yet, or made stale by
-- a change that did not rewrite it (the trigger below); readers then render the row itself.
ALTER TABLE jobs ADD COLUMN json_head TEXT, ADD COLUMN json_tail TEXT;

-- The provider feed: the open jobs of one (service, ZIP) in feed order. (The JSON text stays
-- out of the index: PostgreSQL caps an index entry at about 2.7 kB.)
CREATE INDEX jobs_feed_open ON jobs (service, zip, feed_at, seq) WHERE status IN ('PENDING', 'QUOTED');
-- A provider's own pending quotes (its quotes on open jobs), read once per feed; it also serves
-- every lookup by provider, so it replaces quotes_provider (one index less to write per quote).
CREATE INDEX quotes_provider_open ON quotes (provider_id, status, job_id);
DROP INDEX quotes_provider;

-- Any change to a member of the Job JSON by a statement that leaves both parts as they were (a
-- writer outside the jobs domain, an operator's UPDATE) leaves the JSON NULL.
CREATE FUNCTION jobs_json_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.json_head IS NOT DISTINCT FROM OLD.json_head AND NEW.json_tail IS NOT DISTINCT FROM OLD.json_tail AND
     (NEW.id, NEW.customer_id, NEW.provider_id, NEW.service, NEW.description, NEW.preferred_at, NEW.is_asap,
      NEW.details, NEW.address, NEW.zip, NEW.lat, NEW.lng, NEW.status, NEW.tip_cents, NEW.eta_minutes,
      NEW.created_at, NEW.updated_at) IS DISTINCT FROM
     (OLD.id, OLD.customer_id, OLD.provider_id, OLD.service, OLD.description, OLD.preferred_at, OLD.is_asap,
      OLD.details, OLD.address, OLD.zip, OLD.lat, OLD.lng, OLD.status, OLD.tip_cents, OLD.eta_minutes,
      OLD.created_at, OLD.updated_at) THEN
    NEW.json_head := NULL;
    NEW.json_tail := NULL;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER jobs_json_stale BEFORE UPDATE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_json_stale();
