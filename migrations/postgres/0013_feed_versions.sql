-- The provider feed's cache check (docs/internals/job-json.md): each (service, ZIP) has a
-- version that every change to one of its open jobs moves, in that change's own transaction.
-- A process keeps each pair's open jobs in memory with the version it read them at, and reads
-- them again only when the version it reads now differs. Versions come from a sequence, so a
-- pair never gets back a version it had before.
CREATE SEQUENCE feed_version_seq;
CREATE TABLE feed_versions (
  service TEXT NOT NULL,
  zip TEXT NOT NULL,
  version BIGINT NOT NULL,
  PRIMARY KEY (service, zip)
);

-- Any insert, update or delete of a job that is open before or after it (the feed holds only
-- PENDING and QUOTED jobs) moves the version of its pair, and of its old pair if it moved.
-- (The statements stay in PL/pgSQL, whose plans are kept: a SQL-language helper function was
-- planned again at every call.)
CREATE FUNCTION jobs_feed_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.status IN ('PENDING', 'QUOTED') THEN
    INSERT INTO feed_versions (service, zip, version) VALUES (OLD.service, OLD.zip, nextval('feed_version_seq'))
    ON CONFLICT (service, zip) DO UPDATE SET version = EXCLUDED.version;
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.status IN ('PENDING', 'QUOTED') AND
     (TG_OP = 'INSERT' OR OLD.status NOT IN ('PENDING', 'QUOTED') OR OLD.service IS DISTINCT FROM NEW.service OR
      OLD.zip IS DISTINCT FROM NEW.zip) THEN
    INSERT INTO feed_versions (service, zip, version) VALUES (NEW.service, NEW.zip, nextval('feed_version_seq'))
    ON CONFLICT (service, zip) DO UPDATE SET version = EXCLUDED.version;
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER jobs_feed_changed AFTER INSERT OR UPDATE OR DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION jobs_feed_changed();
