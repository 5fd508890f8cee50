/* An email's HTML part from its text, and MIME body parts (ext/mail_render.h). The HTML is
 * written for mail clients: a table for the button (Outlook ignores padding on links), every
 * style inline (many clients drop <style>), nothing loaded from elsewhere. */
#include "ext/mail_render.h"
#include "core/util.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define FONT "font-family:Arial,Helvetica,sans-serif;"
#define BLUE "#1d4ed8"
/* A label taken from the line above an action is at most this long ("Approve:", "Deny:"). */
#define LABEL_MAX 40

static void escaped(struct buf *b, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    switch (s[i]) {
    case '&': buf_add(b, "&amp;"); break;
    case '<': buf_add(b, "&lt;"); break;
    case '>': buf_add(b, "&gt;"); break;
    case '"': buf_add(b, "&quot;"); break;
    case '\'': buf_add(b, "&#39;"); break;
    default: buf_addn(b, s + i, 1);
    }
  }
}

/* The length of the scheme at s followed by "://" and at least one more character ("https",
 * "myapp"), or 0. */
static size_t scheme_len(const char *s, size_t n) {
  if (!n || !isalpha((unsigned char)s[0])) return 0;
  size_t i = 1;
  while (i < n && (isalnum((unsigned char)s[i]) || strchr("+.-", s[i]))) i++;
  return i + 3 < n && !memcmp(s + i, "://", 3) ? i : 0;
}

/* A line that is only an address: the address's start and length through out. */
static bool action_line(const char *line, size_t n, const char **at, size_t *len) {
  while (n && isspace((unsigned char)*line)) line++, n--;
  while (n && isspace((unsigned char)line[n - 1])) n--;
  if (!scheme_len(line, n)) return false;
  for (size_t i = 0; i < n; i++)
    if (isspace((unsigned char)line[i]) || line[i] == '<' || line[i] == '>' || line[i] == '"') return false;
  *at = line, *len = n;
  return true;
}

/* The end of a web address starting at s (within n bytes): up to a space or a character that
 * cannot be in one, less the punctuation that ends a sentence. */
static size_t address_end(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && !isspace((unsigned char)s[i]) && !strchr("<>\"", s[i])) i++;
  while (i > 0 && strchr(".,;:!?)]'", s[i - 1])) i--;
  return i;
}

/* One line of a paragraph: escaped, its web addresses made links. */
static void text_line(struct buf *b, const char *s, size_t n) {
  size_t i = 0, from = 0;
  while (i < n) {
    bool web = (n - i > 7 && !strncmp(s + i, "http://", 7)) || (n - i > 8 && !strncmp(s + i, "https://", 8));
    if (!web || (i > 0 && (isalnum((unsigned char)s[i - 1]) || s[i - 1] == '/'))) {
      i++;
      continue;
    }
    size_t len = address_end(s + i, n - i);
    escaped(b, s + from, i - from);
    buf_add(b, "<a href=\"");
    escaped(b, s + i, len);
    buf_add(b, "\" style=\"color:" BLUE ";\">");
    escaped(b, s + i, len);
    buf_add(b, "</a>");
    i += len ? len : 1;
    from = i;
  }
  escaped(b, s + from, n - from);
}

typedef struct line {
  const char *s;
  size_t n;
} line;

static void paragraph(struct buf *b, const line *lines, size_t n) {
  if (!n) return;
  buf_add(b, "<p style=\"margin:0 0 16px;white-space:pre-wrap;\">");
  for (size_t i = 0; i < n; i++) {
    if (i) buf_add(b, "\n");
    text_line(b, lines[i].s, lines[i].n);
  }
  buf_add(b, "</p>\n");
}

static void action(struct buf *b, const char *url, size_t n, const char *label, size_t label_len) {
  buf_add(b, "<table role=\"presentation\" cellspacing=\"0\" cellpadding=\"0\" border=\"0\" style=\"margin:4px 0 8px;"
             "border-collapse:separate;\"><tr><td style=\"border-radius:6px;background-color:" BLUE ";\">"
             "<a class=\"button\" href=\"");
  escaped(b, url, n);
  buf_add(b, "\" style=\"display:inline-block;padding:12px 22px;" FONT "font-size:16px;font-weight:bold;"
             "line-height:1.2;color:#ffffff;text-decoration:none;border-radius:6px;\">");
  escaped(b, label, label_len);
  buf_add(b, "</a></td></tr></table>\n<p style=\"margin:0 0 16px;font-size:13px;color:#52525b;"
             "word-break:break-all;\">Or open this link: <a href=\"");
  escaped(b, url, n);
  buf_add(b, "\" style=\"color:" BLUE ";\">");
  escaped(b, url, n);
  buf_add(b, "</a></p>\n");
}

/* The text's lines, CRs dropped (heap; *count lines). */
static line *split_lines(const char *text, size_t *count) {
  size_t cap = 1;
  for (const char *p = text; *p; p++) cap += *p == '\n';
  line *lines = xcalloc(cap, sizeof *lines);
  size_t n = 0;
  for (const char *p = text;;) {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len && p[len - 1] == '\r') len--;
    lines[n++] = (line){p, len};
    if (!end) break;
    p = end + 1;
  }
  while (n && lines[n - 1].n == 0) n--;
  *count = n;
  return lines;
}

static bool blank(const line *l) {
  for (size_t i = 0; i < l->n; i++)
    if (!isspace((unsigned char)l->s[i])) return false;
  return true;
}

char *mail_render_html(const char *subject, const char *text) {
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  buf_add(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>");
  escaped(&b, subject, strlen(subject));
  buf_add(&b, "</title></head>\n<body style=\"margin:0;padding:0;background-color:#f4f4f5;\">\n"
              "<div style=\"max-width:600px;margin:0 auto;padding:24px 12px;\">\n"
              "<div style=\"background-color:#ffffff;border-radius:8px;padding:24px;" FONT
              "font-size:16px;line-height:1.5;color:#18181b;\">\n");
  size_t n;
  line *lines = split_lines(text, &n);
  size_t actions = 0;
  const char *at;
  size_t len;
  for (size_t i = 0; i < n; i++) actions += action_line(lines[i].s, lines[i].n, &at, &len);
  size_t start = 0; /* the first line of the paragraph being gathered */
  for (size_t i = 0; i <= n; i++) {
    if (i == n || blank(&lines[i])) {
      paragraph(&b, lines + start, i - start);
      start = i + 1;
      continue;
    }
    if (!action_line(lines[i].s, lines[i].n, &at, &len)) continue;
    const line *above = i > start ? &lines[i - 1] : NULL;
    bool named = above && above->n > 1 && above->n <= LABEL_MAX && above->s[above->n - 1] == ':';
    paragraph(&b, lines + start, i - start - named);
    if (named)
      action(&b, at, len, above->s, above->n - 1);
    else if (actions == 1)
      action(&b, at, len, subject, strlen(subject));
    else
      action(&b, at, len, "Open the link", 13);
    start = i + 1;
  }
  free(lines);
  buf_add(&b, "</div>\n</div>\n</body></html>\n");
  return buf_take(&b, NULL);
}

/* ---- MIME parts ---- */

static bool plain_enough(const char *s, const char *boundary) {
  size_t col = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p >= 0x80 || (*p == '\r' && p[1] != '\n')) return false;
    col = *p == '\n' ? 0 : col + 1;
    if (col > 998) return false;
  }
  return !strstr(s, boundary);
}

/* content with CRLF line ends, as 7bit */
static void seven_bit(struct buf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '\r') continue;
    if (*s == '\n') buf_add(b, "\r");
    buf_addn(b, s, 1);
  }
}

/* content as quoted-printable (RFC 2045 6.7): line ends become CRLF, lines are cut with soft
 * breaks at 76 characters, '=', controls, bytes past ASCII and a space or tab that ends a line
 * are written =XX. */
static void quoted_printable(struct buf *b, const char *s) {
  static const char HEX[] = "0123456789ABCDEF";
  size_t col = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '\r' && p[1] == '\n') continue;
    if (*p == '\n') {
      buf_add(b, "\r\n"), col = 0;
      continue;
    }
    bool line_end = p[1] == 0 || p[1] == '\n' || (p[1] == '\r' && p[2] == '\n');
    bool literal = (*p >= 33 && *p <= 126 && *p != '=') || ((*p == ' ' || *p == '\t') && !line_end);
    size_t w = literal ? 1 : 3;
    if (col + w > 75) buf_add(b, "=\r\n"), col = 0;
    if (literal)
      buf_addn(b, p, 1);
    else
      buf_addf(b, "=%c%c", HEX[*p >> 4], HEX[*p & 15]);
    col += w;
  }
}

void mail_render_part(struct buf *b, const char *boundary, const char *content_type, const char *content) {
  bool plain = plain_enough(content, boundary);
  buf_addf(b, "--%s\r\nContent-Type: %s; charset=utf-8\r\nContent-Transfer-Encoding: %s\r\n\r\n", boundary,
           content_type, plain ? "7bit" : "quoted-printable");
  if (plain)
    seven_bit(b, content);
  else
    quoted_printable(b, content);
  if (!b->len || b->ptr[b->len - 1] != '\n') buf_add(b, "\r\n");
}
