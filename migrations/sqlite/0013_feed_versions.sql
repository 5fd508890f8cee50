-- The provider feed's cache check (docs/internals/job-json.md): each (service, ZIP) has a
-- version that every change to one of its open jobs moves, in that change's own transaction.
-- A process keeps each pair's open jobs in memory with the version it read them at, and reads
-- them again only when the version it reads now differs.
CREATE TABLE feed_versions (
  service TEXT NOT NULL,
  zip TEXT NOT NULL,
  version INTEGER NOT NULL,
  PRIMARY KEY (service, zip)
) WITHOUT ROWID;

-- Any insert, update or delete of a job that is open before or after it (the feed holds only
-- PENDING and QUOTED jobs) moves the version of its pair, and of its old pair if it moved.
CREATE TRIGGER jobs_feed_inserted AFTER INSERT ON jobs WHEN NEW.status IN ('PENDING', 'QUOTED')
BEGIN
  INSERT OR IGNORE INTO feed_versions (service, zip, version) VALUES (NEW.service, NEW.zip, 0);
  UPDATE feed_versions SET version = version + 1 WHERE service = NEW.service AND zip = NEW.zip;
END;

CREATE TRIGGER jobs_feed_updated AFTER UPDATE ON jobs
WHEN OLD.status IN ('PENDING', 'QUOTED') OR NEW.status IN ('PENDING', 'QUOTED')
BEGIN
  INSERT OR IGNORE INTO feed_versions (service, zip, version) VALUES (OLD.service, OLD.zip, 0);
  INSERT OR IGNORE INTO feed_versions (service, zip, version) VALUES (NEW.service, NEW.zip, 0);
  UPDATE feed_versions SET version = version + 1
  WHERE (service = OLD.service AND zip = OLD.zip) OR (service = NEW.service AND zip = NEW.zip);
END;

CREATE TRIGGER jobs_feed_deleted AFTER DELETE ON jobs WHEN OLD.status IN ('PENDING', 'QUOTED')
BEGIN
  INSERT OR IGNORE INTO feed_versions (service, zip, version) VALUES (OLD.service, OLD.zip, 0);
  UPDATE feed_versions SET version = version + 1 WHERE service = OLD.service AND zip = OLD.zip;
END;
