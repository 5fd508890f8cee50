/* Licence and insurance recognition over OCR text.
 *
 * The text is cut into lines (trimmed, blank lines dropped); every rule reads lines, so the
 * layout Tesseract or poppler gives (one printed line per text line) is what the rules rely on.
 *
 * Labels ("DOB", "Policy #") are matched case-insensitively at a word start (no letter or
 * digit before) and must end at a word end (no letter after, so "EXP" is not "EXPIRES" but
 * "DOB08/31/1977" still reads); a space in a label matches any run, even empty, of spaces,
 * dots and commas, so "D O B" reads DOB, D.O.B. and D O B. Labels are tried longest first.
 *
 * Dates are taken from labels in the order they are printed: on each line, each date goes to
 * the earliest label before it that has no date yet, so "DOB 01/02/1980 EXP 01/02/2030" and
 * "DOB EXP 01/02/1980 01/02/2030" read the same. Labels left without a date on their line
 * take, in order, the dates of the first of the next three lines that has a date, unless
 * that line has date labels of its own: this reads labels printed above their values and the
 * ACORD 25 table (header "POLICY EFF  POLICY EXP", dates in the row below). The first
 * date a kind of label obtains in the document wins.
 *
 * The government-ID marker is searched in a squeezed copy of the text (letters only,
 * uppercased, apostrophes dropped) that remembers where each word began: a marker must start
 * and end on word boundaries there, which tolerates OCR's stray spaces ("DRIVER LICEN SE"),
 * lost spaces and apostrophes, and reading I as l, without finding "ID CARD" in "PAID CARD".
 *
 * Everything copied into a result is cut on a UTF-8 boundary and made valid UTF-8, so the
 * fields can go into JSON as they are. */
#include "domain/providers/recognition.h"
#include "core/util.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Only this much of a text is read: three pages of a certificate are far less, and the rules
 * stay fast on whatever a text layer holds. */
enum { MAX_TEXT = 64 * 1024 };

/* ---- characters (ASCII, independent of the locale) ---- */

static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_letter(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
static bool is_alnum(int c) { return is_letter(c) || is_digit(c); }
static bool is_blank(int c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
static int to_upper(int c) { return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c; }

/* Markers only: OCR confuses I and l, so the two letters are one there. */
static bool marker_eq(int pat, int c) {
  c = to_upper(c);
  return c == pat || ((pat == 'I' || pat == 'L') && (c == 'I' || c == 'L'));
}

/* ---- output fields ---- */

/* Length of the valid UTF-8 sequence at s[0..n) (no overlong forms, surrogates or code
 * points past U+10FFFF), 0 when there is none. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t len = s[0] >= 0xC2 && s[0] <= 0xDF   ? 2
               : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
               : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4
                                              : 0;
  if (!len || len > n) return 0;
  unsigned cp = s[0] & (0x7F >> len);
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (s[k] & 0x3F);
  }
  static const unsigned min[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return len;
}

/* Copies s[0..n) into out (cap bytes), never cutting a UTF-8 sequence, and replaces bytes that
 * are not valid UTF-8 with '?'. */
static void copy_field(char *out, size_t cap, const char *s, size_t n) {
  if (n >= cap) {
    n = cap - 1;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  }
  memcpy(out, s, n);
  out[n] = 0;
  for (size_t i = 0; i < n;) {
    size_t len = utf8_len((const unsigned char *)out + i, n - i);
    if (!len)
      out[i++] = '?';
    else
      i += len;
  }
}

static void set_str(char *out, size_t cap, const char *s) { copy_field(out, cap, s, strlen(s)); }

static void add_flag(char flags[8][24], int *n, const char *flag) {
  if (*n < 8) set_str(flags[(*n)++], 24, flag);
}

/* ---- lines ---- */

typedef struct line {
  const char *s;
  int n;
} line;

typedef struct doc {
  line *v;
  int n;
} doc;

/* Splits the first MAX_TEXT bytes of text into trimmed non-blank lines pointing into text;
 * false on out of memory. */
static bool doc_split(const char *text, doc *d) {
  const char *end = text + strnlen(text, MAX_TEXT);
  size_t cap = 1;
  for (const char *p = text; p < end; p++) cap += *p == '\n';
  d->n = 0;
  d->v = malloc(sizeof *d->v * cap);
  if (!d->v) return false;
  for (const char *p = text; p < end;) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    if (!e) e = end;
    const char *a = p, *b = e;
    while (a < b && is_blank(*a)) a++;
    while (b > a && is_blank(b[-1])) b--;
    if (b > a) d->v[d->n++] = (line){a, (int)(b - a)};
    p = e < end ? e + 1 : e;
  }
  return true;
}

/* ---- labels ---- */

/* Matches pat at l->s[i] as the design note says; returns the end of the match or -1. */
static int match_at(const line *l, int i, const char *pat) {
  if (i > 0 && is_alnum(l->s[i - 1])) return -1;
  int j = i;
  for (const char *p = pat; *p; p++) {
    if (*p == ' ') {
      while (j < l->n && (is_blank(l->s[j]) || l->s[j] == '.' || l->s[j] == ',')) j++;
      continue;
    }
    if (j >= l->n || to_upper(l->s[j]) != *p) return -1;
    j++;
  }
  if (j < l->n && is_letter(l->s[j])) return -1;
  return j;
}

/* The first of pats (NULL-terminated) matching at i: its index in *which, the end returned;
 * -1 when none. */
static int match_any(const line *l, int i, const char *const *pats, int *which) {
  for (int k = 0; pats[k]; k++) {
    int e = match_at(l, i, pats[k]);
    if (e >= 0) {
      if (which) *which = k;
      return e;
    }
  }
  return -1;
}

/* Whether any of pats occurs in the line. */
static bool line_has_any(const line *l, const char *const *pats) {
  for (int i = 0; i < l->n; i++)
    if (match_any(l, i, pats, NULL) >= 0) return true;
  return false;
}

/* A label that names a free-text value counts only at the start of its line (nothing but
 * digits and punctuation before it, like a field number) or when a colon follows it. */
static bool label_is_field(const line *l, int start, int end) {
  bool at_start = true;
  for (int i = 0; i < start && at_start; i++) at_start = !is_letter(l->s[i]);
  if (at_start) return true;
  while (end < l->n && is_blank(l->s[end])) end++;
  return end < l->n && l->s[end] == ':';
}

/* The value after a label ending at from: separators (spaces : # . - =) skipped; it ends at
 * a stop label, a tab, three spaces or the end of the line; trailing spaces and separators
 * are cut. Copied into out (cap bytes), spaces collapsed. */
static void value_after(const line *l, int from, const char *const *stops, char *out, size_t cap) {
  int i = from;
  while (i < l->n && (is_blank(l->s[i]) || strchr(":#.-=", l->s[i]))) i++;
  int e = i;
  for (; e < l->n; e++) {
    if (l->s[e] == '\t') break;
    if (e + 2 < l->n && l->s[e] == ' ' && l->s[e + 1] == ' ' && l->s[e + 2] == ' ') break;
    if (stops && e > i && match_any(l, e, stops, NULL) >= 0) break;
  }
  while (e > i && (is_blank(l->s[e - 1]) || strchr(":#-,;=", l->s[e - 1]))) e--;
  char buf[512];
  size_t n = 0;
  for (int k = i; k < e && n + 1 < sizeof buf; k++) {
    char c = is_blank(l->s[k]) ? ' ' : l->s[k];
    if (c == ' ' && n > 0 && buf[n - 1] == ' ') continue;
    buf[n++] = c;
  }
  copy_field(out, cap, buf, n);
}

/* ---- dates ---- */

typedef struct ymd {
  int y, m, d; /* y == 0: none */
} ymd;

static int days_in_month(int y, int m) {
  static const int dim[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : dim[m - 1];
}

static bool valid_ymd(ymd v) {
  return v.y >= 1900 && v.y <= 2199 && v.m >= 1 && v.m <= 12 && v.d >= 1 && v.d <= days_in_month(v.y, v.m);
}

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static int64_t days_from_civil(ymd v) {
  int y = v.y - (v.m <= 2);
  int era = (y >= 0 ? y : y - 399) / 400;
  int yoe = y - era * 400;
  int doy = (153 * (v.m + (v.m > 2 ? -3 : 9)) + 2) / 5 + v.d - 1;
  int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return (int64_t)era * 146097 + doe - 719468;
}

static int64_t today_days(int64_t now_ms) {
  const int64_t day = 86400000;
  return now_ms >= 0 ? now_ms / day : -((-now_ms + day - 1) / day);
}

static void format_iso(ymd v, char out[11]) {
  int parts[3] = {v.y, v.m, v.d}, widths[3] = {4, 2, 2}, n = 0;
  for (int p = 0; p < 3; p++) {
    if (p) out[n++] = '-';
    for (int w = widths[p] - 1, x = parts[p]; w >= 0; w--, x /= 10) out[n + w] = (char)('0' + x % 10);
    n += widths[p];
  }
  out[n] = 0;
}

/* Length of the digit run at i, its value in *val when it has at most 4 digits. */
static int digit_run(const line *l, int i, int *val) {
  int j = i, v = 0;
  for (; j < l->n && is_digit(l->s[j]); j++)
    if (j - i < 4) v = v * 10 + (l->s[j] - '0');
  *val = v;
  return j - i;
}

/* A '/' or '-' (the same one both times: *sep remembers it), with up to two spaces each side. */
static int date_sep(const line *l, int i, char *sep) {
  for (int k = 0; k < 2 && i < l->n && l->s[i] == ' '; k++) i++;
  if (i >= l->n || (l->s[i] != '/' && l->s[i] != '-') || (*sep && l->s[i] != *sep)) return -1;
  *sep = l->s[i++];
  for (int k = 0; k < 2 && i < l->n && l->s[i] == ' '; k++) i++;
  return i;
}

/* A calendar date at i (a digit with none before it): MM/DD/YYYY, MM-DD-YYYY, YYYY-MM-DD or
 * YYYY/MM/DD, one- or two-digit month and day. Returns its end, -1 when there is none. */
static int parse_date(const line *l, int i, ymd *out) {
  int a, b, c, na, nb, nc;
  char sep = 0;
  if ((na = digit_run(l, i, &a)) < 1 || na > 4 || na == 3) return -1;
  if ((i = date_sep(l, i + na, &sep)) < 0) return -1;
  if ((nb = digit_run(l, i, &b)) < 1 || nb > 2) return -1;
  if ((i = date_sep(l, i + nb, &sep)) < 0) return -1;
  if ((nc = digit_run(l, i, &c)) < 1 || nc > 4) return -1;
  ymd v;
  if (na == 4 && nc <= 2)
    v = (ymd){a, b, c};
  else if (na <= 2 && nc == 4)
    v = (ymd){c, a, b};
  else
    return -1;
  if (!valid_ymd(v)) return -1;
  *out = v;
  return i + nc;
}

typedef struct dlabel {
  const char *pat;
  int kind;
} dlabel;

enum { K_DOB, K_LEXP, K_ISS, K_EFF, K_IEXP, K_NKINDS };

static const dlabel licence_dates[] = {
    {"DATE OF BIRTH", K_DOB},
    {"BIRTH DATE", K_DOB},
    {"D O B", K_DOB},
    {"EXPIRATION DATE", K_LEXP},
    {"EXPIRATION", K_LEXP},
    {"EXPIRES", K_LEXP},
    {"EXPIRY", K_LEXP},
    {"EXP", K_LEXP},
    {"DATE OF ISSUE", K_ISS},
    {"ISSUE DATE", K_ISS},
    {"ISSUED", K_ISS},
    {"ISS", K_ISS},
    {NULL, 0},
};

static const dlabel insurance_dates[] = {
    {"EFFECTIVE DATE", K_EFF},   {"POLICY EFF", K_EFF},
    {"EFF DATE", K_EFF},         {"EFFECTIVE", K_EFF},
    {"EXPIRATION DATE", K_IEXP}, {"POLICY EXP", K_IEXP},
    {"EXP DATE", K_IEXP},        {"EXPIRATION", K_IEXP},
    {"EXPIRES", K_IEXP},         {NULL, 0},
};

static int match_dlabel(const line *l, int i, const dlabel *labels, int *kind) {
  for (int k = 0; labels[k].pat; k++) {
    int e = match_at(l, i, labels[k].pat);
    if (e >= 0) {
      *kind = labels[k].kind;
      return e;
    }
  }
  return -1;
}

typedef struct item {
  int start, end, kind; /* kind < 0: a date */
  ymd date;
} item;

enum { MAX_ITEMS = 48 };

/* The dates and date labels of a line, in reading order. */
static int scan_line(const line *l, const dlabel *labels, item *it) {
  int n = 0;
  for (int i = 0; i < l->n && n < MAX_ITEMS;) {
    if (is_digit(l->s[i]) && (i == 0 || !is_digit(l->s[i - 1]))) {
      ymd v;
      int e = parse_date(l, i, &v);
      if (e > 0) {
        it[n++] = (item){i, e, -1, v};
        i = e;
        continue;
      }
      while (i < l->n && is_digit(l->s[i])) i++;
      continue;
    }
    int kind = 0, e = match_dlabel(l, i, labels, &kind);
    if (e > 0) {
      it[n++] = (item){i, e, kind, {0, 0, 0}};
      i = e;
      continue;
    }
    i++;
  }
  return n;
}

/* The first of the three lines below li that has a date, when it has no date label of its own
 * (a table row under a header of labels); -1 otherwise. */
static int row_below(const doc *d, int li, const dlabel *labels) {
  item it[MAX_ITEMS];
  for (int r = li + 1; r < d->n && r <= li + 3; r++) {
    int n = scan_line(&d->v[r], labels, it);
    bool dates = false;
    for (int k = 0; k < n; k++) {
      if (it[k].kind >= 0) return -1;
      dates = true;
    }
    if (dates) return r;
  }
  return -1;
}

/* Gives each date label its date (see the design note) into found[kind]. */
static void assign_dates(const doc *d, const dlabel *labels, ymd found[K_NKINDS]) {
  item it[MAX_ITEMS], row[MAX_ITEMS];
  for (int li = 0; li < d->n; li++) {
    int n = scan_line(&d->v[li], labels, it), queue[MAX_ITEMS], qn = 0, qh = 0;
    for (int k = 0; k < n; k++) {
      if (it[k].kind >= 0)
        queue[qn++] = it[k].kind;
      else if (qh < qn) {
        int kind = queue[qh++];
        if (!found[kind].y) found[kind] = it[k].date;
      }
    }
    if (qh == qn) continue;
    int r = row_below(d, li, labels);
    if (r < 0) continue;
    int rn = scan_line(&d->v[r], labels, row);
    for (int k = 0; k < rn && qh < qn; k++) {
      int kind = queue[qh++];
      if (!found[kind].y) found[kind] = row[k].date;
    }
  }
}

/* ---- licence ---- */

static const char *const markers[] = {
    "DRIVERLICENSE",
    "DRIVERSLICENSE",
    "DRIVERLICENCE",
    "DRIVERSLICENCE",
    "DRIVINGLICENSE",
    "DRIVINGLICENCE",
    "IDENTIFICATIONCARD",
    "IDCARD",
    "COMMERCIALDRIVER",
    "LEARNERPERMIT",
    "LEARNERSPERMIT",
    "INSTRUCTIONPERMIT",
    NULL,
};

typedef struct squeezed {
  char *c;     /* uppercase letters */
  bool *start; /* a word begins here */
  int *li;     /* the line it came from */
  int n;
} squeezed;

static bool is_apostrophe(const char *s, int i, int n, int *len) {
  unsigned char c = (unsigned char)s[i];
  *len = 1;
  if (c == '\'' || c == '`') return true;
  /* U+2018, U+2019 (E2 80 98/99) and U+00B4 (C2 B4) */
  if (c == 0xE2 && i + 2 < n && (unsigned char)s[i + 1] == 0x80 &&
      ((unsigned char)s[i + 2] == 0x98 || (unsigned char)s[i + 2] == 0x99)) {
    *len = 3;
    return true;
  }
  if (c == 0xC2 && i + 1 < n && (unsigned char)s[i + 1] == 0xB4) {
    *len = 2;
    return true;
  }
  return false;
}

static bool squeeze(const doc *d, squeezed *q) {
  size_t total = 1;
  for (int li = 0; li < d->n; li++) total += (size_t)d->v[li].n;
  q->n = 0;
  q->c = malloc(total), q->start = malloc(total * sizeof *q->start), q->li = malloc(total * sizeof *q->li);
  if (!q->c || !q->start || !q->li) return false;
  for (int li = 0; li < d->n; li++) {
    const line *l = &d->v[li];
    bool boundary = true;
    for (int i = 0, len = 1; i < l->n; i += len) {
      len = 1;
      if (is_apostrophe(l->s, i, l->n, &len)) continue;
      if (!is_letter(l->s[i])) {
        boundary = true;
        continue;
      }
      q->c[q->n] = (char)to_upper(l->s[i]), q->start[q->n] = boundary, q->li[q->n] = li;
      q->n++, boundary = false;
    }
  }
  return true;
}

static void squeezed_fini(squeezed *q) { free(q->c), free(q->start), free(q->li); }

static bool squeezed_match(const squeezed *q, int p, const char *word) {
  int k = 0;
  for (; word[k]; k++)
    if (p + k >= q->n || !marker_eq(word[k], q->c[p + k])) return false;
  return true;
}

/* The line of the first government-ID marker that does not follow "INSURANCE" (an insurance
 * ID card is not an ID), -1 when there is none. */
static int find_marker(const squeezed *q) {
  for (int p = 0; p < q->n; p++) {
    if (!q->start[p]) continue;
    for (int m = 0; markers[m]; m++) {
      int len = (int)strlen(markers[m]);
      if (!squeezed_match(q, p, markers[m])) continue;
      if (p + len < q->n && !q->start[p + len]) continue;
      if (p >= 9 && q->start[p - 9] && squeezed_match(q, p - 9, "INSURANCE")) continue;
      return q->li[p];
    }
  }
  return -1;
}

typedef struct state_name {
  const char *name, *code;
} state_name;

static const state_name states[] = {
    {"ALABAMA", "AL"},
    {"ALASKA", "AK"},
    {"ARIZONA", "AZ"},
    {"ARKANSAS", "AR"},
    {"CALIFORNIA", "CA"},
    {"COLORADO", "CO"},
    {"CONNECTICUT", "CT"},
    {"DELAWARE", "DE"},
    {"DISTRICT OF COLUMBIA", "DC"},
    {"FLORIDA", "FL"},
    {"GEORGIA", "GA"},
    {"HAWAII", "HI"},
    {"IDAHO", "ID"},
    {"ILLINOIS", "IL"},
    {"INDIANA", "IN"},
    {"IOWA", "IA"},
    {"KANSAS", "KS"},
    {"KENTUCKY", "KY"},
    {"LOUISIANA", "LA"},
    {"MAINE", "ME"},
    {"MARYLAND", "MD"},
    {"MASSACHUSETTS", "MA"},
    {"MICHIGAN", "MI"},
    {"MINNESOTA", "MN"},
    {"MISSISSIPPI", "MS"},
    {"MISSOURI", "MO"},
    {"MONTANA", "MT"},
    {"NEBRASKA", "NE"},
    {"NEVADA", "NV"},
    {"NEW HAMPSHIRE", "NH"},
    {"NEW JERSEY", "NJ"},
    {"NEW MEXICO", "NM"},
    {"NEW YORK", "NY"},
    {"NORTH CAROLINA", "NC"},
    {"NORTH DAKOTA", "ND"},
    {"OHIO", "OH"},
    {"OKLAHOMA", "OK"},
    {"OREGON", "OR"},
    {"PENNSYLVANIA", "PA"},
    {"RHODE ISLAND", "RI"},
    {"SOUTH CAROLINA", "SC"},
    {"SOUTH DAKOTA", "SD"},
    {"TENNESSEE", "TN"},
    {"TEXAS", "TX"},
    {"UTAH", "UT"},
    {"VERMONT", "VT"},
    {"VIRGINIA", "VA"},
    {"WASHINGTON D C", "DC"},
    {"WASHINGTON", "WA"},
    {"WEST VIRGINIA", "WV"},
    {"WISCONSIN", "WI"},
    {"WYOMING", "WY"},
    {NULL, NULL},
};

/* Codes that are also English words in capitals: taken only alone on a line or next to USA. */
static const char *const ambiguous_codes[] = {"ID", "IN", "OR", "ME", "OK", "HI", "DE", NULL};

static bool is_ambiguous(const char *code) {
  for (int k = 0; ambiguous_codes[k]; k++)
    if (!strcmp(code, ambiguous_codes[k])) return true;
  return false;
}

/* Whether the word before [start, end) or after it is "USA". */
static bool next_to_usa(const line *l, int start, int end) {
  int i = start - 1;
  while (i >= 0 && !is_letter(l->s[i])) i--;
  if (i >= 2 && match_at(l, i - 2, "USA") == i + 1) return true;
  i = end;
  while (i < l->n && !is_letter(l->s[i])) i++;
  return i < l->n && match_at(l, i, "USA") >= 0;
}

/* The two-letter state code written in capitals as its own word at i; NULL when none. */
static const char *state_code_at(const line *l, int i) {
  if (i + 1 >= l->n || (i > 0 && is_alnum(l->s[i - 1])) || (i + 2 < l->n && is_alnum(l->s[i + 2]))) return NULL;
  char code[3] = {l->s[i], l->s[i + 1], 0};
  if (code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z') return NULL;
  for (int k = 0; states[k].name; k++) {
    if (strcmp(states[k].code, code)) continue;
    if (!is_ambiguous(code)) return states[k].code;
    bool alone = true;
    for (int j = 0; j < l->n && alone; j++) alone = (j == i || j == i + 1) || !is_alnum(l->s[j]);
    return alone || next_to_usa(l, i, i + 2) ? states[k].code : NULL;
  }
  return NULL;
}

/* The issuing state from the header: the first 5 lines, or down to the marker's line. */
static void find_state(const doc *d, int marker_line, char out[3]) {
  int last = marker_line > 4 ? marker_line : 4;
  for (int li = 0; li <= last && li < d->n; li++) {
    const line *l = &d->v[li];
    for (int i = 0; i < l->n; i++)
      for (int k = 0; states[k].name; k++)
        if (match_at(l, i, states[k].name) >= 0) {
          set_str(out, 3, states[k].code);
          return;
        }
  }
  for (int li = 0; li <= last && li < d->n; li++) {
    const line *l = &d->v[li];
    for (int i = 0; i + 1 < l->n; i++) {
      const char *code = state_code_at(l, i);
      if (code) {
        set_str(out, 3, code);
        return;
      }
    }
  }
}

static const char *const lic_last[] = {"LAST NAME", "LN", NULL};
static const char *const lic_first[] = {"FIRST NAME", "FN", NULL};
static const char *const lic_name[] = {"FULL NAME", "NAME", NULL};
static const char *const lic_number[] = {
    "LICENSE NUMBER", "LICENSE NO", "LICENSE #", "LIC NO", "LIC #", "DL NO", "DLN", "DL", "ID NO", "ID #", "ID", NULL};
/* Where a value on a licence line ends. */
static const char *const lic_stops[] = {
    "DATE OF BIRTH", "BIRTH DATE", "D O B",   "EXPIRATION", "EXPIRES",    "EXPIRY", "EXP",  "DATE OF ISSUE",
    "ISSUE DATE",    "ISSUED",     "ISS",     "LAST NAME",  "FIRST NAME", "LN",     "FN",   "NAME",
    "DLN",           "DL",         "SEX",     "HGT",        "WGT",        "EYES",   "HAIR", "CLASS",
    "RSTR",          "END",        "ADDRESS", NULL,
};

/* A person's name from a label's value: leading field numbers dropped, ends at the first
 * character a name does not have (digits, most punctuation), "LAST, FIRST" turned round.
 * "" when fewer than two letters remain. */
static void clean_name(const char *v, char *out, size_t cap) {
  char buf[256];
  size_t n = 0;
  const unsigned char *p = (const unsigned char *)v;
  while (*p && !is_letter(*p) && *p < 0x80) p++;
  for (; *p && n + 1 < sizeof buf; p++) {
    if (!(is_letter(*p) || *p >= 0x80 || *p == ' ' || *p == '-' || *p == '\'' || *p == ',' || *p == '.')) break;
    if (*p == ' ' && n > 0 && buf[n - 1] == ' ') continue;
    buf[n++] = (char)*p;
  }
  while (n > 0 && strchr(" ,.-'", buf[n - 1])) n--;
  buf[n] = 0;
  int letters = 0;
  for (size_t k = 0; k < n; k++) letters += is_letter(buf[k]) || (unsigned char)buf[k] >= 0x80;
  out[0] = 0;
  if (letters < 2) return;
  char *comma = strchr(buf, ',');
  if (!comma) {
    copy_field(out, cap, buf, n);
    return;
  }
  *comma = 0;
  const char *first = comma + 1;
  while (*first == ' ' || *first == ',') first++;
  char swapped[260];
  size_t m = 0;
  for (const char *s = first; *s && m + 1 < sizeof swapped; s++)
    if (*s != ',') swapped[m++] = *s;
  if (m && m + 1 < sizeof swapped) swapped[m++] = ' ';
  for (const char *s = buf; *s && m + 1 < sizeof swapped; s++) swapped[m++] = *s;
  copy_field(out, cap, swapped, m);
}

/* A line that can be a name on its own: no digits or colon, at least two letters, no licence
 * label and no marker words. */
static bool name_like(const line *l) {
  int letters = 0;
  for (int i = 0; i < l->n; i++) {
    if (is_digit(l->s[i]) || l->s[i] == ':') return false;
    letters += is_letter(l->s[i]);
  }
  if (letters < 2 || line_has_any(l, lic_stops) || line_has_any(l, lic_number)) return false;
  static const char *const doc_words[] = {"LICENSE", "LICENCE", "CARD", "PERMIT", "USA", NULL};
  return !line_has_any(l, doc_words);
}

/* The name after the first occurrence of any of labels that gives one: on the label's line
 * or, when nothing follows the label there, the next line if it reads as a name alone.
 * field_only: the label must be a field (label_is_field). */
static bool name_from_labels(const doc *d, const char *const *labels, bool field_only, char *out, size_t cap) {
  for (int li = 0; li < d->n; li++) {
    const line *l = &d->v[li];
    for (int i = 0; i < l->n; i++) {
      int e = match_any(l, i, labels, NULL);
      if (e < 0 || (field_only && !label_is_field(l, i, e))) continue;
      char v[256];
      value_after(l, e, lic_stops, v, sizeof v);
      if (!v[0] && li + 1 < d->n && name_like(&d->v[li + 1]))
        copy_field(v, sizeof v, d->v[li + 1].s, (size_t)d->v[li + 1].n);
      clean_name(v, out, cap);
      if (out[0]) return true;
    }
  }
  return false;
}

/* The holder's name: LN/FN (or LAST NAME/FIRST NAME) combined as "First Last"; else a NAME
 * field; else the line after the licence number when it reads as a name. */
static void find_name(const doc *d, char *out, size_t cap) {
  char last[128] = "", first[128] = "";
  name_from_labels(d, lic_last, false, last, sizeof last);
  name_from_labels(d, lic_first, false, first, sizeof first);
  if (first[0] || last[0]) {
    char both[260];
    size_t n = 0;
    for (const char *s = first; *s && n + 1 < sizeof both; s++) both[n++] = *s;
    if (first[0] && last[0]) both[n++] = ' ';
    for (const char *s = last; *s && n + 1 < sizeof both; s++) both[n++] = *s;
    copy_field(out, cap, both, n);
    return;
  }
  if (name_from_labels(d, lic_name, true, out, cap)) return;
  for (int li = 0; li + 1 < d->n; li++) {
    const line *l = &d->v[li];
    for (int i = 0; i < l->n; i++) {
      int e = match_any(l, i, lic_number, NULL);
      if (e < 0) continue;
      char v[64];
      value_after(l, e, lic_stops, v, sizeof v);
      bool digits = false;
      for (const char *s = v; *s && *s != ' '; s++) digits |= is_digit(*s);
      if (!digits || !name_like(&d->v[li + 1])) continue;
      char nv[256];
      copy_field(nv, sizeof nv, d->v[li + 1].s, (size_t)d->v[li + 1].n);
      clean_name(nv, out, cap);
      if (out[0]) return;
    }
  }
}

static void licence_status(licence_result *out, const char *status) {
  set_str(out->status, sizeof out->status, status);
}

void recognize_licence(const char *text, double confidence, int64_t now_ms, licence_result *out) {
  doc d = {0};
  squeezed q = {0};
  memset(out, 0, sizeof *out);
  bool empty = true;
  for (const char *p = text ? text : ""; *p && empty; p++) empty = !is_alnum(*p);
  if (!(confidence >= RECOGNITION_MIN_CONFIDENCE) || empty) {
    licence_status(out, "failed");
    add_flag(out->flags, &out->nflags, "unreadable");
    goto out;
  }
  if (!doc_split(text, &d) || !squeeze(&d, &q)) {
    licence_status(out, "error");
    goto out;
  }
  int marker_line = find_marker(&q);
  if (marker_line < 0) {
    licence_status(out, "failed");
    add_flag(out->flags, &out->nflags, "not_a_license");
    goto out;
  }
  ymd found[K_NKINDS] = {{0, 0, 0}};
  assign_dates(&d, licence_dates, found);
  int64_t today = today_days(now_ms);
  if (found[K_DOB].y && days_from_civil(found[K_DOB]) > today) found[K_DOB].y = 0;
  if (found[K_DOB].y) format_iso(found[K_DOB], out->dob);
  if (found[K_LEXP].y) format_iso(found[K_LEXP], out->expiry);
  find_name(&d, out->name, sizeof out->name);
  find_state(&d, marker_line, out->state);

  bool no_dob = !found[K_DOB].y, no_exp = !found[K_LEXP].y, expired = false, near = false;
  if (no_dob) add_flag(out->flags, &out->nflags, "no_dob");
  if (no_exp) add_flag(out->flags, &out->nflags, "no_expiry");
  if (!no_exp) {
    int64_t left = days_from_civil(found[K_LEXP]) - today;
    expired = left < 0, near = !expired && left <= RECOGNITION_NEAR_EXPIRY_DAYS;
    if (expired) add_flag(out->flags, &out->nflags, "expired");
    if (near) add_flag(out->flags, &out->nflags, "near_expiry");
  }
  if ((no_dob && no_exp) || expired)
    licence_status(out, "failed");
  else if (near || no_dob || no_exp)
    licence_status(out, "review");
  else
    licence_status(out, "passed");
out:
  free(d.v);
  squeezed_fini(&q);
}

/* ---- insurance ---- */

/* In priority order; all but INSURER A count only as a field (line start or colon). */
static const char *const ins_carrier[] = {"INSURER A", "INSURANCE COMPANY", "INSURANCE CARRIER",
                                          "CARRIER",   "INSURER",           NULL};
static const char *const ins_policy[] = {"POLICY NUMBER", "POLICY NO", "POLICY NUM", "POLICY #", NULL};
static const char *const ins_coverage[] = {"COVERAGE AMOUNT", "EACH OCCURRENCE", "EACH OCCURENCE",
                                           "LIMITS",          "LIMIT",           NULL};
/* Where a carrier's value ends (not at carrier words: "... Insurance Company" is a name). */
static const char *const ins_stops[] = {
    "POLICY NUMBER",   "POLICY NO",       "POLICY NUM", "POLICY #",   "EFFECTIVE DATE", "POLICY EFF",
    "EFF DATE",        "EFFECTIVE",       "EXPIRATION", "POLICY EXP", "EXP DATE",       "EXPIRES",
    "COVERAGE AMOUNT", "EACH OCCURRENCE", "LIMITS",     "LIMIT",      "NAIC",           NULL,
};
/* Where a policy number's value ends. */
static const char *const ins_policy_stops[] = {
    "INSURER",  "INSURANCE COMPANY", "CARRIER",    "EFFECTIVE", "POLICY EFF",
    "EFF DATE", "EXPIRATION",        "POLICY EXP", "EXP DATE",  "EXPIRES",
    "COVERAGE", "EACH OCCURRENCE",   "LIMITS",     "LIMIT",     NULL,
};

/* A carrier from a label's value: spaces collapsed, a trailing NAIC number dropped; "" when
 * it does not start with a letter or digit, has fewer than two letters, or is another ACORD
 * insurer row ("B : ..."). */
static void clean_carrier(const char *v, char *out, size_t cap) {
  out[0] = 0;
  size_t n = strlen(v);
  if (!n || !is_alnum(v[0])) return;
  size_t k = 1;
  while (k < n && v[k] == ' ') k++;
  if (is_letter(v[0]) && k < n && v[k] == ':') return;
  for (;;) { /* trailing all-digit words */
    size_t s = n;
    while (s > 0 && is_digit(v[s - 1])) s--;
    if (s == n || s == 0 || v[s - 1] != ' ') break;
    n = s - 1;
    while (n > 0 && v[n - 1] == ' ') n--;
  }
  int letters = 0;
  for (size_t i = 0; i < n; i++) letters += is_letter(v[i]);
  if (letters >= 2) copy_field(out, cap, v, n);
}

/* Visits each place where one of labels ends in d, label by label in their order (the first
 * preferred): found(l, i, e, k, ctx) with the label labels[k] at l->s[i..e) takes its value,
 * or not (false: the walk goes on). */
typedef bool (*label_found)(const line *l, int i, int e, int k, void *ctx);
static void each_label(const doc *d, const char *const *labels, label_found found, void *ctx) {
  for (int k = 0; labels[k]; k++) {
    const char *const one[] = {labels[k], NULL};
    for (int li = 0; li < d->n; li++) {
      const line *l = &d->v[li];
      for (int i = 0; i < l->n; i++) {
        int e = match_any(l, i, one, NULL);
        if (e >= 0 && found(l, i, e, k, ctx)) return;
      }
    }
  }
}

/* Where a label's value goes. */
typedef struct field_out {
  char *out;
  size_t cap;
} field_out;

/* The carrier after a label (but the first, which may stand anywhere, one that is a field). */
static bool carrier_found(const line *l, int i, int e, int k, void *ctx) {
  field_out *f = ctx;
  if (k > 0 && !label_is_field(l, i, e)) return false;
  char v[256];
  value_after(l, e, ins_stops, v, sizeof v);
  clean_carrier(v, f->out, f->cap);
  return f->out[0] != 0;
}

static void find_carrier(const doc *d, char *out, size_t cap) {
  each_label(d, ins_carrier, carrier_found, &(field_out){out, cap});
}

static bool policy_char(int c) { return is_alnum(c) || c == '-' || c == '/' || c == '.'; }

/* A policy number from a label's value: its first words while they are written in capitals,
 * digits and - / . (at most four), without trailing words that hold no digit. "" when no
 * digit is left. */
static void clean_policy(const char *v, char *out, size_t cap) {
  size_t end = 0, i = 0;
  out[0] = 0;
  for (int words = 0; v[i] && words < 4; words++) {
    size_t s = i;
    bool digit = false, ok = true;
    for (; v[i] && v[i] != ' '; i++) {
      ok = ok && policy_char(v[i]) && !(v[i] >= 'a' && v[i] <= 'z');
      digit |= is_digit(v[i]);
    }
    size_t e = i;
    while (e > s && (v[e - 1] == '.' || v[e - 1] == '-' || v[e - 1] == '/')) e--;
    if (!ok || e == s) break;
    if (digit) end = e;
    while (v[i] == ' ') i++;
  }
  if (end) copy_field(out, cap, v, end);
}

/* ACORD 25: the word before the first date in the table row under the header line li. */
static void policy_from_row(const doc *d, int li, char *out, size_t cap) {
  int r = row_below(d, li, insurance_dates);
  if (r < 0) return;
  const line *l = &d->v[r];
  item it[MAX_ITEMS];
  int n = scan_line(l, insurance_dates, it);
  if (n < 1 || it[0].kind >= 0) return;
  int e = it[0].start;
  while (e > 0 && is_blank(l->s[e - 1])) e--;
  int s = e;
  while (s > 0 && policy_char(l->s[s - 1])) s--;
  int digits = 0;
  for (int i = s; i < e; i++) digits += is_digit(l->s[i]);
  if (e - s >= 4 && digits > 0 && (s == 0 || is_blank(l->s[s - 1]))) copy_field(out, cap, l->s + s, (size_t)(e - s));
}

static void find_policy(const doc *d, char *out, size_t cap) {
  int header = -1;
  for (int li = 0; li < d->n; li++) {
    const line *l = &d->v[li];
    for (int i = 0; i < l->n; i++) {
      int e = match_any(l, i, ins_policy, NULL);
      if (e < 0) continue;
      if (header < 0) header = li;
      char v[256];
      value_after(l, e, ins_policy_stops, v, sizeof v);
      clean_policy(v, out, cap);
      if (out[0]) return;
    }
  }
  if (header >= 0) policy_from_row(d, header, out, cap);
}

/* A dollar amount at i: "$1,000,000", "1,000,000.00", "$ 2M", "1.5 million", "500K", or
 * four or more plain digits; cents are dropped. Whole dollars (at most 10^15) into *dollars;
 * returns the end, -1 when there is none. */
static int parse_amount(const line *l, int i, uint64_t *dollars) {
  static const struct {
    const char *word;
    uint64_t mult;
  } suffixes[] = {{"MILLION", 1000000}, {"MIL", 1000000},   {"MM", 1000000},
                  {"M", 1000000},       {"THOUSAND", 1000}, {"K", 1000}};
  const uint64_t max = 1000000000000000ULL;
  const char *s = l->s;
  int n = l->n, j = i, digits = 0;
  bool dollar = false, commas = false;
  uint64_t v = 0, frac = 0, fscale = 1, mult = 1;
  if (s[j] == '$') {
    dollar = true, j++;
    while (j < n && s[j] == ' ') j++;
  }
  if (j >= n || !is_digit(s[j])) return -1;
  for (; j < n && is_digit(s[j]); j++, digits++) {
    if (digits >= 15) return -1;
    v = v * 10 + (uint64_t)(s[j] - '0');
  }
  while (j + 3 < n && s[j] == ',' && is_digit(s[j + 1]) && is_digit(s[j + 2]) && is_digit(s[j + 3]) &&
         !(j + 4 < n && is_digit(s[j + 4]))) {
    if (v >= max / 1000) return -1;
    v = v * 1000 + (uint64_t)((s[j + 1] - '0') * 100 + (s[j + 2] - '0') * 10 + (s[j + 3] - '0'));
    commas = true, j += 4;
  }
  if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1]))
    for (j++; j < n && is_digit(s[j]); j++)
      if (fscale < 1000000) frac = frac * 10 + (uint64_t)(s[j] - '0'), fscale *= 10;
  if (j + 1 < n && (s[j] == '/' || s[j] == '-' || s[j] == ':') && is_digit(s[j + 1])) return -1;
  int k = j < n && s[j] == ' ' ? j + 1 : j;
  for (size_t m = 0; m < sizeof suffixes / sizeof suffixes[0]; m++) {
    const char *w = suffixes[m].word;
    int t = k;
    while (*w && t < n && to_upper(s[t]) == *w) t++, w++;
    if (*w || (t < n && is_letter(s[t]))) continue;
    mult = suffixes[m].mult, j = t;
    break;
  }
  if (mult == 1 && j < n && is_letter(s[j])) return -1;
  if (!(dollar || commas || mult > 1 || digits >= 4)) return -1;
  if (v > max / mult) return -1;
  uint64_t total = v * mult + (mult > 1 ? frac * mult / fscale : 0);
  if (total == 0) return -1;
  *dollars = total;
  return j;
}

/* The first amount after a coverage label on its line (dates skipped). */
static bool amount_after(const line *l, int from, uint64_t *dollars) {
  for (int i = from; i < l->n; i++) {
    char c = l->s[i], prev = i > 0 ? l->s[i - 1] : ' ';
    if (is_digit(c) && is_digit(prev)) continue;
    if (is_digit(c)) {
      ymd v;
      int e = parse_date(l, i, &v);
      if (e > 0) {
        i = e - 1;
        continue;
      }
    }
    if (c == '$' || (is_digit(c) && (is_blank(prev) || prev == ':' || prev == '(' || i == 0))) {
      if (parse_amount(l, i, dollars) > 0) return true;
    }
  }
  return false;
}

/* The amount after a coverage label, as digits. */
static bool coverage_found(const line *l, int i, int e, int k, void *ctx) {
  (void)i, (void)k;
  field_out *f = ctx;
  uint64_t dollars = 0;
  if (!amount_after(l, e, &dollars)) return false;
  char digits[20];
  copy_field(f->out, f->cap, digits, uint_digits(dollars, digits));
  return true;
}

static void find_coverage(const doc *d, char *out, size_t cap) {
  each_label(d, ins_coverage, coverage_found, &(field_out){out, cap});
}

/* "1000000" -> "1,000,000" */
static void group_thousands(const char *digits, char *out, size_t cap) {
  char buf[48];
  size_t n = strlen(digits), m = 0;
  for (size_t i = 0; i < n && m + 2 < sizeof buf; i++) {
    if (i && (n - i) % 3 == 0) buf[m++] = ',';
    buf[m++] = digits[i];
  }
  copy_field(out, cap, buf, m);
}

static void append(char *out, size_t cap, const char *a, const char *b) {
  size_t n = strlen(out);
  if (n && n + 2 < cap) memcpy(out + n, ", ", 3), n += 2;
  size_t la = strlen(a), lb = strlen(b);
  if (n + la + lb + 1 > cap) return;
  memcpy(out + n, a, la);
  memcpy(out + n + la, b, lb + 1);
}

static void insurance_summary(insurance_result *out) {
  char *s = out->summary;
  size_t cap = sizeof out->summary;
  s[0] = 0;
  if (out->fields_found < 2) return;
  if (out->carrier[0]) append(s, cap, "", out->carrier);
  if (out->policy[0]) append(s, cap, "policy ", out->policy);
  if (out->effective[0]) append(s, cap, "effective ", out->effective);
  if (out->expiry[0]) append(s, cap, "expires ", out->expiry);
  if (out->coverage[0]) {
    char grouped[48];
    group_thousands(out->coverage, grouped, sizeof grouped);
    append(s, cap, "coverage $", grouped);
  }
}

static void insurance_status(insurance_result *out, const char *status) {
  set_str(out->status, sizeof out->status, status);
}

void recognize_insurance(const char *text, int64_t now_ms, insurance_result *out) {
  doc d = {0};
  memset(out, 0, sizeof *out);
  if (!doc_split(text ? text : "", &d)) {
    insurance_status(out, "error");
    goto out;
  }
  find_carrier(&d, out->carrier, sizeof out->carrier);
  find_policy(&d, out->policy, sizeof out->policy);
  ymd found[K_NKINDS] = {{0, 0, 0}};
  assign_dates(&d, insurance_dates, found);
  if (found[K_EFF].y) format_iso(found[K_EFF], out->effective);
  if (found[K_IEXP].y) format_iso(found[K_IEXP], out->expiry);
  find_coverage(&d, out->coverage, sizeof out->coverage);
  out->fields_found =
      !!out->carrier[0] + !!out->policy[0] + !!out->effective[0] + !!out->expiry[0] + !!out->coverage[0];
  insurance_summary(out);

  if (!found[K_IEXP].y) {
    add_flag(out->flags, &out->nflags, "no_expiry");
    insurance_status(out, "review");
    goto out;
  }
  int64_t left = days_from_civil(found[K_IEXP]) - today_days(now_ms);
  if (left < 0) {
    add_flag(out->flags, &out->nflags, "expired");
    insurance_status(out, "expired");
  } else if (left <= RECOGNITION_NEAR_EXPIRY_DAYS) {
    add_flag(out->flags, &out->nflags, "near_expiry");
    insurance_status(out, "review");
  } else {
    insurance_status(out, "active");
  }
out:
  free(d.v);
}
