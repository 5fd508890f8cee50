/* The process's own directory for temporary files (uploads being received, documents being
 * recognised): $DATA_DIR/tmp/<pid>-<random>/, locked with flock() for the process's life.
 *
 * A process that dies (SIGKILL, a crash, power loss) leaves its directory behind, and the
 * kernel releases its lock. tmpdir_init() removes every directory under $DATA_DIR/tmp whose
 * lock it can take, so partial files never pile up after crashes, while instances that
 * share the data directory keep theirs (their locks are held). */
#ifndef CORE_TMPDIR_H
#define CORE_TMPDIR_H
#include <stdbool.h>

/* Removes what dead processes left and creates this process's directory. Call once at
 * start-up, before any thread; false with a message in err. */
bool tmpdir_init(char err[256]);
/* This process's directory; without tmpdir_init (command-line tools, tests), $DATA_DIR/tmp. */
const char *tmpdir_path(void);

#endif
