-- Issue 24: stable links and paging. Every statement may run again (it changes only what it
-- has not changed yet).
--
-- A photo message keeps its file's storage key ("[IMAGE]<key>"), no longer a URL signed once
-- for a year: every answer signs it when it is read (the same URL throughout its hour). A row
-- written before holds "[IMAGE]{PUBLIC_URL}/files/<key>?expires=...&sig=..."; its key is the
-- text between "/files/" and "?".
UPDATE messages
SET content = '[IMAGE]' || substr(substr(content, instr(content, '/files/') + 7), 1,
                                  instr(substr(content, instr(content, '/files/') + 7), '?') - 1)
WHERE content LIKE '[IMAGE]%/files/%?%';

-- The provider feed pages by (feed_at, seq, id) and filters by status: the open jobs' index
-- also carries the status, so a part is still read from the index alone.
DROP INDEX IF EXISTS jobs_feed_open;
CREATE INDEX IF NOT EXISTS jobs_feed_open ON jobs (service, zip, feed_at, seq, id, json_head, json_tail, images, before_images,
  after_images, status) WHERE status IN ('PENDING', 'QUOTED');

-- The staff searches list accounts newest first and page by (created_at, id).
CREATE INDEX IF NOT EXISTS users_created ON users (created_at, id);
CREATE INDEX IF NOT EXISTS providers_created ON providers (created_at, id);
