/* Unit tests for src/ext/mail_render.c: the HTML part made from an email's text, and MIME
 * parts (7bit when plain, quoted-printable otherwise). */
#include "ext/mail_render.h"
#include "unit.h"
#include <stdlib.h>
#include <string.h>

static char *render(const char *subject, const char *text) { return mail_render_html(subject, text); }

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static void test_a_lone_link_is_a_button_labelled_with_the_subject(void **state) {
  (void)state;
  char *h = render("Reset your password", "Hello Ann,\n\nOpen this link:\n\nhttps://app.example.com/r?token=ab&x=1\n\n"
                                          "Bye.\n");
  assert_non_null(strstr(h, "<a class=\"button\" href=\"https://app.example.com/r?token=ab&amp;x=1\""));
  assert_non_null(strstr(h, ">Reset your password</a>"));
  /* the link is also written out */
  assert_non_null(strstr(h, ">https://app.example.com/r?token=ab&amp;x=1</a>"));
  assert_int_equal(count(h, "href=\"https://app.example.com/r?token=ab&amp;x=1\""), 2);
  assert_non_null(strstr(h, "Hello Ann,</p>"));
  assert_null(strstr(h, "<script"));
  assert_null(strstr(h, "<img"));
  free(h);
}

static void test_a_short_line_ending_in_a_colon_labels_the_link_below(void **state) {
  (void)state;
  char *h = render("Elevation", "Approve:\nhttps://x.example/a\n\nDeny:\nhttps://x.example/d\n");
  assert_non_null(strstr(h, "href=\"https://x.example/a\" style=\"display:inline-block;"));
  assert_non_null(strstr(h, ">Approve</a>"));
  assert_non_null(strstr(h, ">Deny</a>"));
  assert_null(strstr(h, "Approve:"));
  free(h);
}

static void test_custom_schemes_and_several_links(void **state) {
  (void)state;
  char *h = render("S", "One:\nmyapp://a?token=1\n\nA long sentence that introduces the second link:\n"
                        "myapp://b\nthird http://c.example/x. done");
  assert_non_null(strstr(h, ">One</a>"));
  assert_non_null(strstr(h, "href=\"myapp://b\""));
  assert_non_null(strstr(h, ">Open the link</a>"));
  /* a web address inside a sentence is a link, without the sentence's full stop */
  assert_non_null(strstr(h, "<a href=\"http://c.example/x\" style=\"color:#1d4ed8;\">http://c.example/x</a>. done"));
  free(h);
}

static void test_text_is_escaped(void **state) {
  (void)state;
  char *h = render("<b>\"Hi\"</b>", "Dear <script>alert('x')</script> & co\n");
  assert_null(strstr(h, "<script>"));
  assert_non_null(strstr(h, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"));
  assert_non_null(strstr(h, "<title>&lt;b&gt;&quot;Hi&quot;&lt;/b&gt;</title>"));
  free(h);
}

static char *part(const char *content) {
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  mail_render_part(&b, "=_alt_x", "text/plain", content);
  return buf_take(&b, NULL);
}

static void test_plain_ascii_goes_as_7bit_with_crlf(void **state) {
  (void)state;
  char *p = part("a=b\nc\n");
  assert_string_equal(p, "--=_alt_x\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 7bit"
                         "\r\n\r\na=b\r\nc\r\n");
  free(p);
}

static void test_non_ascii_and_long_lines_go_quoted_printable(void **state) {
  (void)state;
  char *p = part("Zo\xc3\xab = ok \nend");
  assert_non_null(strstr(p, "Content-Transfer-Encoding: quoted-printable\r\n\r\nZo=C3=AB =3D ok=20\r\nend\r\n"));
  free(p);
  char line[2000];
  memset(line, 'x', sizeof line - 1);
  line[sizeof line - 1] = 0;
  p = part(line);
  assert_non_null(strstr(p, "quoted-printable"));
  for (char *l = strstr(p, "\r\n\r\n") + 4, *end; (end = strstr(l, "\r\n")); l = end + 2) assert_true(end - l <= 76);
  free(p);
  p = part("holds --=_alt_x the boundary");
  assert_non_null(strstr(p, "quoted-printable"));
  free(p);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_a_lone_link_is_a_button_labelled_with_the_subject),
          cmocka_unit_test(test_a_short_line_ending_in_a_colon_labels_the_link_below),
          cmocka_unit_test(test_custom_schemes_and_several_links), cmocka_unit_test(test_text_is_escaped),
          cmocka_unit_test(test_plain_ascii_goes_as_7bit_with_crlf),
          cmocka_unit_test(test_non_ascii_and_long_lines_go_quoted_printable))
