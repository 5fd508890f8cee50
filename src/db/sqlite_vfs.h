/* The VFS the service's SQLite connections open with (sqlite_vfs.c): the unix VFS, with a
 * transaction's WAL frames written to the file together. */
#ifndef DB_SQLITE_VFS_H
#define DB_SQLITE_VFS_H

#define SQLITE_VFS_NAME "marketplace"

/* Registers the VFS (once, before the first connection opens) and returns its name. */
const char *sqlite_vfs_register(void);

#endif
