/* See tmpdir.h. Directories are recognised by their ".lock" file; loose files directly under
 * $DATA_DIR/tmp (left by versions before this one) are removed too. */
#include "core/tmpdir.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/util.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static char path[4200];

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(p);
}

/* True when the directory's owner is gone: its lock can be taken. */
static bool abandoned(const char *dir) {
  char lock[4300];
  snprintf(lock, sizeof lock, "%s/.lock", dir);
  int fd = open(lock, O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT; /* never locked: a process that died while creating it */
  bool free_lock = flock(fd, LOCK_EX | LOCK_NB) == 0;
  close(fd);
  return free_lock;
}

static int sweep(const char *root) {
  DIR *d = opendir(root);
  if (!d) return 0;
  int removed = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", root, e->d_name);
    struct stat st;
    if (lstat(p, &st) != 0) continue;
    if (S_ISDIR(st.st_mode) ? abandoned(p) && nftw(p, remove_entry, 8, FTW_DEPTH | FTW_PHYS) == 0 : unlink(p) == 0)
      removed++;
  }
  closedir(d);
  return removed;
}

bool tmpdir_init(char err[256]) {
  char root[4150];
  snprintf(root, sizeof root, "%s/tmp", CFG.data_dir);
  if (!mkdir_p(root)) return snprintf(err, 256, "cannot create %s", root), false;
  int removed = sweep(root);
  if (removed) log_msg(LOG_INFO, "removed %d temporary file(s) left by processes that stopped", removed);
  char id[ID_LEN + 1];
  id_new(id);
  snprintf(path, sizeof path, "%s/%ld-%s", root, (long)getpid(), id + ID_LEN - 8);
  char lock[4300];
  snprintf(lock, sizeof lock, "%s/.lock", path);
  int fd = mkdir(path, 0700) == 0 ? open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
  if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) return snprintf(err, 256, "cannot lock %s", lock), false;
  return true; /* fd stays open: the lock lives as long as the process */
}

const char *tmpdir_path(void) {
  if (!path[0]) { /* no tmpdir_init: the shared directory (single-threaded tools and tests) */
    snprintf(path, sizeof path, "%s/tmp", CFG.data_dir);
    mkdir_p(path);
  }
  return path;
}
