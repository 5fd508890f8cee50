-- Issue 33: push per device. An account's devices, each with its push token: a push goes to every
-- device of the account. device_id is the app's name for the device ("default" when the app names
-- none: one device, the behaviour of the users and providers tables' push_token column, whose
-- tokens move here). session_id is the session (login) of the token that registered the device:
-- logging that session out removes it ('' for the devices moved here, which no session owns).
CREATE TABLE push_devices (
  account_id TEXT NOT NULL,
  role TEXT NOT NULL,
  device_id TEXT NOT NULL,
  token TEXT NOT NULL,
  session_id TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (account_id, role, device_id)
);
CREATE INDEX push_devices_session ON push_devices (session_id);
CREATE INDEX push_devices_token ON push_devices (token);

INSERT INTO push_devices (account_id, role, device_id, token, session_id, created_at, updated_at)
SELECT id, 'user', 'default', push_token, '', updated_at, updated_at FROM users
WHERE push_token IS NOT NULL AND deleted_at IS NULL;
INSERT INTO push_devices (account_id, role, device_id, token, session_id, created_at, updated_at)
SELECT id, 'provider', 'default', push_token, '', updated_at, updated_at FROM providers
WHERE push_token IS NOT NULL AND deleted_at IS NULL;
ALTER TABLE users DROP COLUMN push_token;
ALTER TABLE providers DROP COLUMN push_token;
