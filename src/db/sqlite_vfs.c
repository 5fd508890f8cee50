/* The VFS the service's SQLite connections open with: the unix VFS, but a transaction's WAL
 * frames go to the file in one write instead of two per page.
 *
 * SQLite writes each frame as two pwrite()s, its 24-byte header and then its page, and an
 * acceptance's four commits append about 80 frames: 160-odd system calls, each taking the
 * inode's lock and the page cache's walk again for a few bytes. Here the frames a connection
 * appends are kept in a buffer and written together when the commit's last frame is in it,
 * before the commit is published: a commit of 25 rows cost 595 us of CPU on the unix VFS and
 * 495 here, 127 pwrite()s and 31 (bench/wal_commit.c; docs/performance-history.md, section 29).
 *
 * Why this keeps SQLite's guarantees. A commit becomes visible to readers (and to the recovery
 * after a crash) only when the writer updates the wal-index header in shared memory, through
 * the database file's xShmBarrier, after its frames; the buffer is written out by then. It is
 * written out at the latest at any other use of either file (a read, a sync, a size, a
 * truncation, closing, any shared-memory lock or barrier), so the bytes only ever wait while
 * the connection holds the WAL's write lock between two of its own frame writes, where nobody
 * else may read them: the file's contents, whenever another connection or process can look,
 * are those the plain unix VFS would have left. A crash before the buffer is written loses a
 * commit that was never published nor acknowledged, as a crash between two of SQLite's own
 * writes would. The database file's calls pass through (its shared-memory ones after its WAL's
 * buffer is written out); other files (a VACUUM INTO copy's journal, temporary files) are the
 * unix VFS's own objects, untouched. */
#include "db/sqlite_vfs.h"
#include "core/log.h"
#include "core/util.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_HEADER 24          /* a WAL frame's header (sqlite's WAL_FRAME_HDRSIZE) */
#define BUFFER_FIRST (64 * 1024) /* a commit of an everyday write: 20-30 frames of 4 KiB */
#define BUFFER_MAX (1024 * 1024) /* past this a large transaction's frames go out as they come */
#define UNIX_WRITE_MAX 0x1ffff   /* the unix VFS writes at most this much a call (seekAndWriteFd) */

typedef struct db_file db_file;

/* A WAL file: the unix VFS's object follows it in the same allocation. */
typedef struct {
  sqlite3_file base;
  sqlite3_file *real;
  db_file *db;        /* the database file of the same connection; NULL: nothing is buffered */
  unsigned char *buf; /* bytes appended since the last write-out, for offset at */
  size_t len, cap;
  sqlite3_int64 at;
  bool commit_frame; /* the header just buffered is a commit's: its page ends the commit */
} wal_file;

/* A database file: as the unix VFS's, with the shared-memory calls writing out its WAL's
 * buffer first. */
struct db_file {
  sqlite3_file base;
  sqlite3_file *real;
  const char *name; /* the name SQLite opened it by: its WAL's name leads back to it */
  wal_file *wal;
  db_file *next; /* open database files, for a WAL opening to find its own */
};

static sqlite3_vfs vfs, *unix_vfs;
static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER; /* open_dbs and the db <-> wal links */
static db_file *open_dbs;

/* The unix VFS's object behind either kind of ours (real at the same place in both), and its
 * method m called on it. */
_Static_assert(offsetof(wal_file, real) == offsetof(db_file, real), "real: the same offset in both kinds of file");
#define REAL(f) (*(sqlite3_file **)((char *)(f) + offsetof(wal_file, real)))
#define PASS(f, m, ...) REAL(f)->pMethods->m(REAL(f), __VA_ARGS__)
#define PASS0(f, m) REAL(f)->pMethods->m(REAL(f))
/* A call that writes the WAL's buffer out first (out), then passes on unless that failed. */
#define OUT_THEN(out, f, m, ...)                                                                                       \
  do {                                                                                                                 \
    int rc_ = (out);                                                                                                   \
    return rc_ != SQLITE_OK ? rc_ : PASS(f, m, __VA_ARGS__);                                                           \
  } while (0)

static int check_reserved(sqlite3_file *f, int *out) { return PASS(f, xCheckReservedLock, out); }
static int sector_size(sqlite3_file *f) { return PASS0(f, xSectorSize); }
static int device_characteristics(sqlite3_file *f) { return PASS0(f, xDeviceCharacteristics); }

static int write_out(wal_file *w) {
  int rc = SQLITE_OK;
  for (size_t done = 0, n; rc == SQLITE_OK && done < w->len; done += n) {
    n = w->len - done < UNIX_WRITE_MAX ? w->len - done : UNIX_WRITE_MAX;
    rc = w->real->pMethods->xWrite(w->real, w->buf + done, (int)n, w->at + (sqlite3_int64)done);
  }
  w->len = 0;
  w->commit_frame = false;
  return rc;
}

static int wal_out(sqlite3_file *f) { return write_out((wal_file *)f); }

/* Only the connection's own thread calls its files, and a WAL is linked to its database file
 * (and unlinked) under open_mu before and after any of those calls: no lock needed here. */
static int db_wal_out(sqlite3_file *f) {
  db_file *d = (db_file *)f;
  return d->wal ? write_out(d->wal) : SQLITE_OK;
}

/* ---- the WAL file ---- */

static int wal_write(sqlite3_file *f, const void *data, int amt, sqlite3_int64 off) {
  wal_file *w = (wal_file *)f;
  if (!w->db || (size_t)amt > BUFFER_MAX) OUT_THEN(write_out(w), f, xWrite, data, amt, off); /* unbuffered */
  if (w->len && (off != w->at + (sqlite3_int64)w->len || w->len + (size_t)amt > BUFFER_MAX)) {
    int rc = write_out(w);
    if (rc != SQLITE_OK) return rc;
  }
  if (w->len + (size_t)amt > w->cap) {
    size_t cap = w->cap ? w->cap : BUFFER_FIRST;
    while (cap < w->len + (size_t)amt) cap *= 2;
    unsigned char *grown = sqlite3_realloc64(w->buf, cap);
    if (!grown) OUT_THEN(write_out(w), f, xWrite, data, amt, off); /* no memory: unbuffered */
    w->buf = grown, w->cap = cap;
  }
  if (w->len == 0) w->at = off;
  bool ends_commit = w->commit_frame;
  memcpy(w->buf + w->len, data, (size_t)amt);
  w->len += (size_t)amt;
  /* a frame's header holds, at bytes 4-7, the database's size in pages after the commit for
   * a commit's frame and 0 for any other */
  const unsigned char *h = data;
  w->commit_frame = amt == FRAME_HEADER && (h[4] | h[5] | h[6] | h[7]);
  return ends_commit ? write_out(w) : SQLITE_OK;
}

static int wal_read(sqlite3_file *f, void *data, int amt, sqlite3_int64 off) {
  OUT_THEN(wal_out(f), f, xRead, data, amt, off);
}
static int wal_truncate(sqlite3_file *f, sqlite3_int64 size) { OUT_THEN(wal_out(f), f, xTruncate, size); }
static int wal_sync(sqlite3_file *f, int flags) { OUT_THEN(wal_out(f), f, xSync, flags); }
static int wal_file_size(sqlite3_file *f, sqlite3_int64 *size) { OUT_THEN(wal_out(f), f, xFileSize, size); }
static int wal_lock(sqlite3_file *f, int level) { OUT_THEN(wal_out(f), f, xLock, level); }
static int wal_unlock(sqlite3_file *f, int level) { OUT_THEN(wal_out(f), f, xUnlock, level); }
static int wal_file_control(sqlite3_file *f, int op, void *arg) { OUT_THEN(wal_out(f), f, xFileControl, op, arg); }

static int wal_close(sqlite3_file *f) {
  wal_file *w = (wal_file *)f;
  int rc = write_out(w);
  pthread_mutex_lock(&open_mu);
  if (w->db) w->db->wal = NULL;
  pthread_mutex_unlock(&open_mu);
  sqlite3_free(w->buf);
  int closed = PASS0(f, xClose);
  return rc != SQLITE_OK ? rc : closed;
}

static const sqlite3_io_methods wal_methods = {
    .iVersion = 1,
    .xClose = wal_close,
    .xRead = wal_read,
    .xWrite = wal_write,
    .xTruncate = wal_truncate,
    .xSync = wal_sync,
    .xFileSize = wal_file_size,
    .xLock = wal_lock,
    .xUnlock = wal_unlock,
    .xCheckReservedLock = check_reserved,
    .xFileControl = wal_file_control,
    .xSectorSize = sector_size,
    .xDeviceCharacteristics = device_characteristics,
};

/* ---- the database file: the unix VFS's, its WAL written out before any shared-memory call ---- */

static int db_close(sqlite3_file *f) {
  db_file *d = (db_file *)f;
  pthread_mutex_lock(&open_mu);
  for (db_file **p = &open_dbs; *p; p = &(*p)->next)
    if (*p == d) {
      *p = d->next;
      break;
    }
  if (d->wal) d->wal->db = NULL;
  pthread_mutex_unlock(&open_mu);
  return PASS0(f, xClose);
}

static int db_read(sqlite3_file *f, void *data, int amt, sqlite3_int64 off) { return PASS(f, xRead, data, amt, off); }
static int db_write(sqlite3_file *f, const void *data, int amt, sqlite3_int64 off) {
  return PASS(f, xWrite, data, amt, off);
}
static int db_truncate(sqlite3_file *f, sqlite3_int64 size) { return PASS(f, xTruncate, size); }
static int db_sync(sqlite3_file *f, int flags) { return PASS(f, xSync, flags); }
static int db_file_size(sqlite3_file *f, sqlite3_int64 *size) { return PASS(f, xFileSize, size); }
static int db_lock(sqlite3_file *f, int level) { return PASS(f, xLock, level); }
static int db_unlock(sqlite3_file *f, int level) { return PASS(f, xUnlock, level); }
static int db_file_control(sqlite3_file *f, int op, void *arg) { return PASS(f, xFileControl, op, arg); }
static int db_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **out) { return PASS(f, xFetch, off, amt, out); }
static int db_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) { return PASS(f, xUnfetch, off, p); }

static int db_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **out) {
  OUT_THEN(db_wal_out(f), f, xShmMap, page, size, extend, out);
}
static int db_shm_lock(sqlite3_file *f, int offset, int n, int flags) {
  OUT_THEN(db_wal_out(f), f, xShmLock, offset, n, flags);
}
static int db_shm_unmap(sqlite3_file *f, int delete_flag) { OUT_THEN(db_wal_out(f), f, xShmUnmap, delete_flag); }

/* Where a commit is published: its frames must be in the file before the barrier. The buffer is
 * empty here unless a commit's last frame was not recognised; a failure to write it then cannot
 * be returned, and publishing the commit without it would corrupt the database. */
static void db_shm_barrier(sqlite3_file *f) {
  if (db_wal_out(f) != SQLITE_OK) {
    log_msg(LOG_ERROR, "sqlite: a WAL write failed before a commit's publication; stopping");
    abort();
  }
  PASS0(f, xShmBarrier);
}

static const sqlite3_io_methods db_methods = {
    .iVersion = 3,
    .xClose = db_close,
    .xRead = db_read,
    .xWrite = db_write,
    .xTruncate = db_truncate,
    .xSync = db_sync,
    .xFileSize = db_file_size,
    .xLock = db_lock,
    .xUnlock = db_unlock,
    .xCheckReservedLock = check_reserved,
    .xFileControl = db_file_control,
    .xSectorSize = sector_size,
    .xDeviceCharacteristics = device_characteristics,
    .xShmMap = db_shm_map,
    .xShmLock = db_shm_lock,
    .xShmBarrier = db_shm_barrier,
    .xShmUnmap = db_shm_unmap,
    .xFetch = db_fetch,
    .xUnfetch = db_unfetch,
};

/* ---- the VFS ---- */

/* The unix VFS's object sits after ours, aligned as an allocation would be. */
#define OURS_SIZE ((sizeof(db_file) > sizeof(wal_file) ? sizeof(db_file) : sizeof(wal_file)) + 15) / 16 * 16

static int vfs_open(sqlite3_vfs *self, sqlite3_filename name, sqlite3_file *f, int flags, int *out_flags) {
  (void)self;
  if (!(flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL)))
    return unix_vfs->xOpen(unix_vfs, name, f, flags, out_flags); /* the unix VFS's object, as is */
  sqlite3_file *real = (sqlite3_file *)((char *)f + OURS_SIZE);
  int rc = unix_vfs->xOpen(unix_vfs, name, real, flags, out_flags);
  if (rc != SQLITE_OK) {
    f->pMethods = NULL;
    return rc;
  }
  if (flags & SQLITE_OPEN_WAL) {
    wal_file *w = (wal_file *)f;
    *w = (wal_file){.base.pMethods = &wal_methods, .real = real};
    const char *db_name = sqlite3_filename_database(name);
    pthread_mutex_lock(&open_mu);
    for (db_file *d = open_dbs; d && db_name; d = d->next)
      if (d->name == db_name && !d->wal) { /* the same pointer: the same connection's pager */
        d->wal = w, w->db = d;
        break;
      }
    pthread_mutex_unlock(&open_mu);
  } else {
    db_file *d = (db_file *)f;
    *d = (db_file){.base.pMethods = &db_methods, .real = real, .name = name};
    pthread_mutex_lock(&open_mu);
    d->next = open_dbs, open_dbs = d;
    pthread_mutex_unlock(&open_mu);
  }
  return SQLITE_OK;
}

static int vfs_delete(sqlite3_vfs *self, const char *name, int sync_dir) {
  (void)self;
  return unix_vfs->xDelete(unix_vfs, name, sync_dir);
}
static int vfs_access(sqlite3_vfs *self, const char *name, int flags, int *out) {
  (void)self;
  return unix_vfs->xAccess(unix_vfs, name, flags, out);
}
static int vfs_full_pathname(sqlite3_vfs *self, const char *name, int n, char *out) {
  (void)self;
  return unix_vfs->xFullPathname(unix_vfs, name, n, out);
}
static void *vfs_dl_open(sqlite3_vfs *self, const char *name) {
  (void)self;
  return unix_vfs->xDlOpen(unix_vfs, name);
}
static void vfs_dl_error(sqlite3_vfs *self, int n, char *msg) {
  (void)self;
  unix_vfs->xDlError(unix_vfs, n, msg);
}
static void (*vfs_dl_sym(sqlite3_vfs *self, void *lib, const char *sym))(void) {
  (void)self;
  return unix_vfs->xDlSym(unix_vfs, lib, sym);
}
static void vfs_dl_close(sqlite3_vfs *self, void *lib) {
  (void)self;
  unix_vfs->xDlClose(unix_vfs, lib);
}
static int vfs_randomness(sqlite3_vfs *self, int n, char *out) {
  (void)self;
  return unix_vfs->xRandomness(unix_vfs, n, out);
}
static int vfs_sleep(sqlite3_vfs *self, int us) {
  (void)self;
  return unix_vfs->xSleep(unix_vfs, us);
}
static int vfs_current_time(sqlite3_vfs *self, double *out) {
  (void)self;
  return unix_vfs->xCurrentTime(unix_vfs, out);
}
static int vfs_last_error(sqlite3_vfs *self, int n, char *out) {
  (void)self;
  return unix_vfs->xGetLastError(unix_vfs, n, out);
}
static int vfs_current_time_int64(sqlite3_vfs *self, sqlite3_int64 *out) {
  (void)self;
  return unix_vfs->xCurrentTimeInt64(unix_vfs, out);
}

const char *sqlite_vfs_register(void) {
  unix_vfs = sqlite3_vfs_find("unix");
  if (!unix_vfs) die("sqlite: the unix VFS is missing");
  vfs = (sqlite3_vfs){.iVersion = 2,
                      .szOsFile = (int)OURS_SIZE + unix_vfs->szOsFile,
                      .mxPathname = unix_vfs->mxPathname,
                      .zName = SQLITE_VFS_NAME,
                      .xOpen = vfs_open,
                      .xDelete = vfs_delete,
                      .xAccess = vfs_access,
                      .xFullPathname = vfs_full_pathname,
                      .xDlOpen = vfs_dl_open,
                      .xDlError = vfs_dl_error,
                      .xDlSym = vfs_dl_sym,
                      .xDlClose = vfs_dl_close,
                      .xRandomness = vfs_randomness,
                      .xSleep = vfs_sleep,
                      .xCurrentTime = vfs_current_time,
                      .xGetLastError = vfs_last_error,
                      .xCurrentTimeInt64 = vfs_current_time_int64};
  if (sqlite3_vfs_register(&vfs, 0) != SQLITE_OK) die("sqlite: registering the %s VFS failed", SQLITE_VFS_NAME);
  return SQLITE_VFS_NAME;
}
