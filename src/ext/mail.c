/* Delivery of queued email. The message is built once (headers, CRLF line endings, a text and
 * an HTML part) and
 * either uploaded to the SMTP server by libcurl or written to a file atomically (a
 * temporary name, then a hard link to the final name) so a reader never sees half a message.
 *
 * A message is identified by its queue row: Message-ID <row-id@marketplace>, file name
 * <queued-at-ms>-<row-id>.eml. A run of the row that finds its file already there (the
 * process died after writing it, before the row was recorded done) delivers nothing: the
 * link fails with EEXIST. Over SMTP the server's acceptance is final once the row is recorded
 * done right after; the one window left, a crash between the two, resends the message with
 * the same Message-ID, by which receiving servers and mail clients drop the copy. */
#include "ext/mail.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/faults.h"
#include "core/ids.h"
#include "core/util.h"
#include "ext/mail_render.h"
#include "ext/queue.h"
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

db_rc mail_enqueue(db_conn *c, const char *to, const char *subject, const char *body) {
  json_t *p = json_pack("{s:s,s:s,s:s}", "to", to, "subject", subject, "body", body);
  db_rc rc = queue_enqueue(c, "email", p);
  json_decref(p);
  return rc;
}

/* Keeps header values on one line: a CR or LF in a subject would inject headers. */
static void header_clean(char *s) {
  for (; *s; s++)
    if (*s == '\r' || *s == '\n') *s = ' ';
}

/* The message: headers, then a multipart/alternative body of the text as written and the HTML
 * rendered from it (ext/mail_render.h). The boundary holds "=_", which quoted-printable content
 * never does, and the message's id, which no text written before it could know. */
static char *build_message(const char *to, const char *subject, const char *body, const char *msgid) {
  char date[64];
  time_t t = (time_t)(clock_now_ms() / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S +0000", &tm);
  char *subj = xstrdup(subject), *rcpt = xstrdup(to);
  header_clean(subj), header_clean(rcpt);
  char boundary[64];
  snprintf(boundary, sizeof boundary, "=_alt_%s", msgid);
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  buf_addf(&b,
           "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s@marketplace>\r\n"
           "MIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"%s\"\r\n"
           "Content-Transfer-Encoding: 7bit\r\n\r\n",
           CFG.mail_from, rcpt, subj, date, msgid, boundary);
  char *html = mail_render_html(subj, body);
  mail_render_part(&b, boundary, "text/plain", body);
  mail_render_part(&b, boundary, "text/html", html);
  buf_addf(&b, "--%s--\r\n", boundary);
  free(subj), free(rcpt), free(html);
  if (buf_result(&b) != BUF_OK) abort(); /* process-lifetime memory: out of memory aborts */
  return buf_take(&b, NULL);
}

typedef struct upload {
  const char *data;
  size_t left;
} upload;

static size_t read_cb(char *buf, size_t size, size_t nitems, void *arg) {
  upload *u = arg;
  size_t n = size * nitems < u->left ? size * nitems : u->left;
  memcpy(buf, u->data, n);
  u->data += n, u->left -= n;
  return n;
}

static bool send_smtp(const char *to, const char *msg, char err[256]) {
  CURL *curl = curl_easy_init();
  if (!curl) return snprintf(err, 256, "curl init failed"), false;
  struct curl_slist *rcpt = curl_slist_append(NULL, to);
  upload u = {msg, strlen(msg)};
  curl_easy_setopt(curl, CURLOPT_URL, CFG.smtp_url);
  curl_easy_setopt(curl, CURLOPT_MAIL_FROM, CFG.mail_from);
  curl_easy_setopt(curl, CURLOPT_MAIL_RCPT, rcpt);
  curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_cb);
  curl_easy_setopt(curl, CURLOPT_READDATA, &u);
  curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(curl, CURLOPT_USE_SSL, (long)CURLUSESSL_TRY);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) snprintf(err, 256, "smtp: %s", curl_easy_strerror(rc));
  curl_slist_free_all(rcpt);
  curl_easy_cleanup(curl);
  return rc == CURLE_OK;
}

int mail_prune_outbox(int64_t keep_ms) {
  char dir[4096], path[4400];
  snprintf(dir, sizeof dir, "%s/mail", CFG.data_dir);
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t before = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - keep_ms;
  int removed = 0;
  struct stat st;
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".eml")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (stat(path, &st) == 0 && (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000 < before &&
        unlink(path) == 0)
      removed++;
  }
  closedir(d);
  return removed;
}

static bool write_eml(const char *msgid, int64_t queued_at, const char *msg, char err[256]) {
  char dir[4096], tmp[4200], path[4200];
  snprintf(dir, sizeof dir, "%s/mail", CFG.data_dir);
  snprintf(path, sizeof path, "%s/%lld-%s.eml", dir, (long long)queued_at, msgid);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, msgid);
  /* the usual case in one call: the directory made and the temporary name free only when the
   * open says otherwise (they cost 8 system calls a message, issue 37) */
  FILE *f = fopen(tmp, "wbx");
  if (!f && errno == ENOENT) {
    if (!mkdir_p(dir)) return snprintf(err, 256, "cannot create %s", dir), false;
    f = fopen(tmp, "wbx");
  }
  if (!f && errno == EEXIST) { /* left by a run that died after the link: the delivered message itself */
    unlink(tmp);
    f = fopen(tmp, "wbx");
  }
  bool ok = f && fputs(msg, f) >= 0;
  if (f && fclose(f) != 0) ok = false;
  if (ok && link(tmp, path) != 0 && errno != EEXIST) ok = false; /* EEXIST: delivered by an earlier run */
  if (ok) fault_point("email-written");
  if (!ok) snprintf(err, 256, "cannot write %s: %s", path, ERRNO_TEXT());
  unlink(tmp);
  return ok;
}

static bool deliver(json_t *p, char err[256]) {
  const char *to = json_string_value(json_object_get(p, "to"));
  const char *subject = json_string_value(json_object_get(p, "subject"));
  const char *body = json_string_value(json_object_get(p, "body"));
  if (!to || !subject || !body) return snprintf(err, 256, "email payload incomplete"), false;
  const queue_item *job = queue_current();
  char msgid[ID_LEN + 1];
  if (job)
    snprintf(msgid, sizeof msgid, "%s", job->id);
  else
    id_new(msgid);
  char *msg = build_message(to, subject, body, msgid);
  bool ok = CFG.smtp_url ? send_smtp(to, msg, err) : write_eml(msgid, job ? job->created_at : clock_now_ms(), msg, err);
  free(msg);
  return ok;
}

void mail_init(void) { queue_register("email", deliver); }
