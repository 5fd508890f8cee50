/* The two parts of every email: the text as its maker wrote it, and an HTML part rendered from
 * that same text, so both say the same and carry the same links.
 *
 * Rendering: paragraphs are the text's blank-line-separated blocks, kept as written (line
 * breaks and indentation preserved, HTML escaped), with web addresses inside them made links.
 * A line that is only an address (any scheme: https://..., myapp://...) is an action: a button
 * whose link is also written out beneath it. The button's label is the line just above it when
 * that line is short and ends with a colon ("Approve:"), else the subject when the email has one
 * action, else "Open the link". Styles are inline; there are no scripts, images or remote
 * assets. Pure functions of their input (no I/O), tested in tests/unit/ext/test_mail_render.c. */
#ifndef EXT_MAIL_RENDER_H
#define EXT_MAIL_RENDER_H
#include "core/buf.h"
#include <stdbool.h>

/* The HTML part of an email with subject and text (UTF-8; LF or CRLF line ends), on the heap. */
char *mail_render_html(const char *subject, const char *text);
/* Appends to b one MIME body part: "--boundary", its Content-Type (content_type, charset utf-8),
 * its Content-Transfer-Encoding and content with CRLF line ends. Content that is ASCII, has no
 * line over 998 bytes and does not hold the boundary goes as 7bit; anything else as
 * quoted-printable (lines of at most 76 characters). */
void mail_render_part(struct buf *b, const char *boundary, const char *content_type, const char *content);

#endif
