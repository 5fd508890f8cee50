/* Command line: serve (default), migrate, admin create, audit verify, payments reconcile, backup,
 * restore, --help,
 * --version.
 * Start-up order: configuration, database and migrations, bootstrap administrator, the
 * password pool, the queue, the routes, then the listener. Shutdown on SIGTERM/SIGINT runs
 * it backwards: stop accepting, finish requests in flight, stop the queue (the unit of
 * work in progress completes, but a document's recognition is interrupted and handed back),
 * close the database. */
#include "core/config.h"
#include "core/log.h"
#include "core/tmpdir.h"
#include "core/util.h"
#include "db/db.h"
#include "db/migrate.h"
#include "demo.h"
#include "domain/audit/audit.h"
#include "domain/auth/auth.h"
#include "domain/backup/backup.h"
#include "domain/jobs/jobs.h"
#include "domain/payments/payments.h"
#include "domain/payouts/payouts.h"
#include "domain/staff/staff.h"
#include "domains.h"
#include "ext/filetype.h"
#include "ext/mail.h"
#include "ext/media.h"
#include "ext/ocr.h"
#include "ext/password.h"
#include "ext/payments.h"
#include "ext/queue.h"
#include "http/openapi.h"
#include "http/router.h"
#include "http/schema.h"
#include "http/server.h"
#include <curl/curl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MARKETPLACE_VERSION
#define MARKETPLACE_VERSION "0.1.0"
#endif

static const char usage[] =
    "Usage: marketplace [command]\n"
    "\n"
    "Commands:\n"
    "  serve                      serve the API (the default)\n"
    "  migrate                    apply database migrations and exit\n"
    "  admin create --email E     create or update an administrator (not in production); password on stdin\n"
    "  demo                       seed the database with demo accounts and jobs (not in production)\n"
    "  openapi                    print the OpenAPI document (what GET /openapi.json serves)\n"
    "  staff create --email E --name N --role R\n"
    "                             create or update a staff member; password on stdin\n"
    "  staff disable --email E    disable a staff member: no login, every token refused\n"
    "  staff enable --email E     let a disabled staff member log in again\n"
    "  staff unlock --email E     let a staff member or administrator locked by failed logins log in\n"
    "                             again (also: staff unlock E)\n"
    "  audit verify [--expect SEQ:HASH]...\n"
    "                             check the audit trail's hash chain and its checkpoints\n"
    "                             (AUDIT_CHECKPOINT_FILE, and each SEQ:HASH given); exit 1 when broken\n"
    "  payments reconcile         settle payments and transfers in uncertain states with the processor\n"
    "                             and exit\n"
    "  backup DEST                a consistent backup while the service runs (database, stored files,\n"
    "                             audit checkpoints, manifest.json) into DEST: an empty directory or\n"
    "                             s3://bucket/prefix; exit 0 once written and checked\n"
    "  restore SRC                restore a backup into an empty DATA_DIR (on PostgreSQL an empty\n"
    "                             database), then compare the row counts and verify the audit trail\n"
    "  --help                     show this help\n"
    "  --version                  print the version\n"
    "\n"
    "Configuration comes from environment variables (PORT, BIND, APP_ENV, DATA_DIR,\n"
    "DATABASE_URL, JWT_SECRET, ...); see README.md.\n";

static void open_database(void) {
  char err[256] = "";
  if (!db_open(CFG.database_url, CFG.db_pool_size, CFG.db_slow_pool_size, err)) die("%s", err);
  if (!db_migrate()) die("database migration failed");
}

/* The value after flag in argv, or NULL. */
static const char *flag_value(int argc, char **argv, const char *flag) {
  for (int i = 0; i < argc - 1; i++)
    if (!strcmp(argv[i], flag)) return argv[i + 1];
  return NULL;
}

/* Administrators are GODMODE's, which production does not have: there the command changes
 * nothing and says so (exit 2), pointing at staff accounts. */
static int cmd_admin_create(int argc, char **argv) {
  if (CFG.env == ENV_PRODUCTION) {
    fputs("admin create: refused: administrators exist only outside production (APP_ENV=production has no "
          "GODMODE: /admin and its login answer 404), so nothing was saved; create staff members with "
          "`marketplace staff create --email E --name N --role R` (docs/operations.md)\n",
          stderr);
    return 2;
  }
  const char *email = flag_value(argc, argv, "--email");
  if (!email || !hs_is_email(email)) die("admin create needs --email with a valid address");
  char password[1024], msg[256];
  if (!fgets(password, sizeof password, stdin)) die("admin create reads the password from standard input");
  password[strcspn(password, "\r\n")] = 0;
  if (auth_password_problem(password, msg)) die("refused: %s (8 to 72 characters, at most 72 bytes)", msg);
  open_database();
  bool ok = auth_admin_upsert(email, password);
  db_close();
  if (!ok) die("could not save the administrator");
  printf("administrator saved\n");
  return 0;
}

static int cmd_staff_create(int argc, char **argv) {
  char password[1024];
  if (!fgets(password, sizeof password, stdin)) die("staff create reads the password from standard input");
  password[strcspn(password, "\r\n")] = 0;
  char msg[320];
  json_t *checked = staff_cli_check(flag_value(argc, argv, "--name"), flag_value(argc, argv, "--email"),
                                    flag_value(argc, argv, "--role"), password, msg);
  if (!checked) return fprintf(stderr, "%s\n", msg), 2;
  open_database();
  int rc = staff_cli_save(checked, msg);
  db_close();
  json_decref(checked);
  fprintf(rc ? stderr : stdout, "%s\n", msg);
  return rc;
}

/* True when the arguments after `audit verify` are pairs `--expect SEQ:HASH`. */
static bool expectations(int argc, char **argv) {
  for (int i = 3; i < argc; i += 2)
    if (strcmp(argv[i], "--expect") || i + 1 >= argc) return false;
  return true;
}

static int cmd_audit_verify(int argc, char **argv) {
  const char **expect = xcalloc((size_t)argc / 2 + 1, sizeof *expect);
  int n = 0;
  for (int i = 1; i < argc; i += 2) expect[n++] = argv[i];
  open_database();
  int rc = audit_verify(stdout, stderr, expect, n);
  db_close();
  free(expect);
  return rc;
}

static int cmd_staff_set_disabled(bool disable, int argc, char **argv) {
  char email[256], msg[320];
  if (!staff_cli_email(flag_value(argc, argv, "--email"), email, msg)) return fprintf(stderr, "%s\n", msg), 2;
  open_database();
  int rc = staff_cli_set_disabled(email, disable, msg);
  db_close();
  fprintf(rc ? stderr : stdout, "%s\n", msg);
  return rc;
}

/* `staff unlock --email E`, or the email alone: `staff unlock E`. */
static int cmd_staff_unlock(int argc, char **argv) {
  char email[256], msg[320];
  const char *given = argc == 1 && strncmp(argv[0], "--", 2) ? argv[0] : flag_value(argc, argv, "--email");
  if (!staff_cli_email(given, email, msg)) return fprintf(stderr, "%s\n", msg), 2;
  open_database();
  int rc = staff_cli_unlock(email, msg);
  db_close();
  fprintf(rc ? stderr : stdout, "%s\n", msg);
  return rc;
}

/* The database is opened without migrating: a backup copies it as it is. */
static int cmd_backup(const char *dest) {
  char err[256] = "";
  if (!db_open(CFG.database_url, 2, 1, err)) die("%s", err);
  int rc = backup_cli(dest);
  db_close();
  return rc;
}

static int cmd_payments_reconcile(void) {
  open_database();
  payments_init();
  jobs_wire_payments();
  int checked, corrected, owing = 0;
  int64_t owed = 0;
  err_t e = payments_reconcile(0, &checked, &corrected);
  if (e == ERR_OK) e = payouts_owing(&owing, &owed);
  db_close();
  if (e != ERR_OK) die("payments could not be read");
  printf("payments reconciled: %d checked, %d corrected\n", checked, corrected);
  printf("provider balances: %d provider%s owe%s %.2f, netted from their next transfers\n", owing,
         owing == 1 ? "" : "s", owing == 1 ? "s" : "", (double)owed / 100);
  return 0;
}

/* BOOTSTRAP_ADMIN_*: the administrator is created when that email has none, under admin
 * create's rules; an existing one keeps its password (set since with `admin create`). */
static void bootstrap_admin(void) {
  if (!CFG.bootstrap_admin_email || !CFG.bootstrap_admin_password) return;
  char msg[256];
  if (auth_password_problem(CFG.bootstrap_admin_password, msg))
    die("BOOTSTRAP_ADMIN_PASSWORD is refused: %s (admin create's rules: 8 to 72 characters, at most 72 bytes)", msg);
  bool created;
  if (!auth_admin_create_absent(CFG.bootstrap_admin_email, CFG.bootstrap_admin_password, &created))
    die("could not create the bootstrap administrator");
  log_msg(LOG_INFO,
          created ? "bootstrap administrator %s created"
                  : "bootstrap administrator %s exists: BOOTSTRAP_ADMIN_PASSWORD is not applied to it",
          CFG.bootstrap_admin_email);
}

/* Everything `serve` runs, listening on bind:port (0: any free port). */
static void service_start(const char *bind, int port) {
  char err[256] = "";
  if (!tmpdir_init(err)) die("%s", err);
  if (!media_library_present(err)) die("%s", err); /* loaded on first use (ext/media.h) */
  open_database();
  bootstrap_admin();
  password_pool_start(CFG.bcrypt_threads, CFG.bcrypt_queue, CFG.bcrypt_cost);
  mail_init();
  payments_init();
  domains_init();
  if (!filetype_init()) die("libmagic could not load its database (package libmagic-mgc)");
  ocr_use_helper("/proc/self/exe", CFG.recognition_timeout_ms);
  queue_start(CFG.queue_workers, CFG.recognition_workers);
  domains_install_routes();
  if (!hs_server_start(bind, port, err)) die("%s", err);
  log_buffering_start();
  log_json(LOG_INFO, "listening",
           json_pack("{s:s,s:i,s:s,s:s}", "bind", bind, "port", hs_server_port(), "env", config_env_name(), "db",
                     db_engine_get() == DB_SQLITE ? "sqlite" : "postgres"));
}

static void service_stop(void) {
  if (!hs_server_stop(CFG.shutdown_grace_ms)) {
    /* a handler still runs and holds database connections and pools: exit under it, as a
     * crash would; its transaction is not committed and queued work resumes after a restart */
    log_msg(LOG_WARN, "requests still running after the grace period were cut off");
    log_buffering_stop();
    _exit(0);
  }
  log_buffering_stop();
  ocr_interrupt(); /* a recognition takes seconds: it is handed back, not waited for */
  queue_stop();
  password_pool_stop();
  domains_stop(); /* after the queue, so the audit trail's last checkpoint follows its last record */
  db_close();
  media_fini();
}

static int cmd_serve(void) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  /* every thread created from here on inherits the mask; only sigwait() below sees them */
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  service_start(CFG.bind, CFG.port);
  int sig = 0;
  sigwait(&stop, &sig);
  log_msg(LOG_INFO, "received %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  service_stop();
  log_msg(LOG_INFO, "stopped");
  return 0;
}

/* The service runs in this process on a loopback port of its own while the seeder drives its
 * API, on the configured database (a running development server sees the data at once). */
static int cmd_demo(void) {
  if (CFG.env == ENV_PRODUCTION) die("demo refuses to run with APP_ENV=production");
  log_set_level(LOG_WARN);
  service_start("127.0.0.1", 0);
  char base[64];
  snprintf(base, sizeof base, "http://127.0.0.1:%d", hs_server_port());
  const char *examples = getenv("DEMO_EXAMPLES_DIR");
  int rc = demo_seed(base, examples && *examples ? examples : "examples");
  service_stop();
  return rc;
}

/* Needs no configuration and no database: the document comes from the route table alone. */
static int cmd_openapi(void) {
  domains_install_routes();
  size_t n;
  const hs_route *rows = hs_router_routes(&n);
  json_t *doc = hs_openapi_document(rows, n);
  json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
  fputc('\n', stdout);
  json_decref(doc);
  return 0;
}

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : "serve";
  if (!strcmp(cmd, "ocr-helper")) return ocr_helper_main(); /* internal: see ext/ocr.h */
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) return fputs(usage, stdout), 0;
  if (!strcmp(cmd, "--version")) return printf("marketplace %s\n", MARKETPLACE_VERSION), 0;
  if (!strcmp(cmd, "openapi")) return cmd_openapi();
  bool audit_verify = !strcmp(cmd, "audit") && argc >= 3 && !strcmp(argv[2], "verify") && expectations(argc, argv);
  bool known = !strcmp(cmd, "serve") || !strcmp(cmd, "migrate") || !strcmp(cmd, "demo") || audit_verify ||
               (!strcmp(cmd, "admin") && argc > 2 && !strcmp(argv[2], "create")) ||
               (!strcmp(cmd, "staff") && argc > 2 &&
                (!strcmp(argv[2], "create") || !strcmp(argv[2], "disable") || !strcmp(argv[2], "enable") ||
                 !strcmp(argv[2], "unlock"))) ||
               (!strcmp(cmd, "payments") && argc == 3 && !strcmp(argv[2], "reconcile")) ||
               ((!strcmp(cmd, "backup") || !strcmp(cmd, "restore")) && argc == 3 && argv[2][0] != '-');
  if (!known) {
    fprintf(stderr, "marketplace: unknown command '%s'\n\n%s", cmd, usage);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  /* Large answers (the feed: 110 KB) are built in request arenas whose chunks glibc handed back
   * to the kernel when freed (mmap above its threshold, trimming of each thread's heap) and
   * faulted in again, page by page, on the next request: perf put 8% of the PostgreSQL feed's
   * time in page faults under memmove. Fixed thresholds keep such chunks in the heap for reuse
   * (and stop glibc from moving them). */
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
  char err[256] = "";
  if (!config_load(err)) die("%s", err);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = 0;
  if (!strcmp(cmd, "serve")) {
    rc = cmd_serve();
  } else if (!strcmp(cmd, "demo")) {
    rc = cmd_demo();
  } else if (!strcmp(cmd, "migrate")) {
    open_database();
    db_close();
    printf("migrations applied\n");
  } else if (audit_verify) {
    rc = cmd_audit_verify(argc - 3, argv + 3);
  } else if (!strcmp(cmd, "backup")) {
    rc = cmd_backup(argv[2]);
  } else if (!strcmp(cmd, "restore")) {
    rc = restore_cli(argv[2]);
  } else if (!strcmp(cmd, "payments")) {
    rc = cmd_payments_reconcile();
  } else if (!strcmp(cmd, "staff") && !strcmp(argv[2], "unlock")) {
    rc = cmd_staff_unlock(argc - 3, argv + 3);
  } else if (!strcmp(cmd, "staff") && strcmp(argv[2], "create")) {
    rc = cmd_staff_set_disabled(!strcmp(argv[2], "disable"), argc - 3, argv + 3);
  } else if (!strcmp(cmd, "staff")) {
    rc = cmd_staff_create(argc - 3, argv + 3);
  } else {
    rc = cmd_admin_create(argc - 3, argv + 3);
  }
  curl_global_cleanup();
  return rc;
}
