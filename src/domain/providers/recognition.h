/* Rules that read a provider's documents: a driver's licence or state ID (idCheck* fields)
 * and a certificate of insurance (insCheck* fields and insuranceInfo), from the text that
 * ext/ocr.h produced. Pure functions of their arguments (no I/O, no clock, no globals), safe
 * from any thread. How each rule reads the text: docs/internals/recognition.md. */
#ifndef DOMAIN_PROVIDERS_RECOGNITION_H
#define DOMAIN_PROVIDERS_RECOGNITION_H
#include <stdint.h>

/* Below this OCR confidence a licence is "unreadable". */
#define RECOGNITION_MIN_CONFIDENCE 0.6
/* An expiry within this many days (today included) is "near expiry" (decisions.md §4). */
#define RECOGNITION_NEAR_EXPIRY_DAYS 30

typedef struct licence_result {
  char status[16];                               /* "passed", "review", "failed", "error" */
  char name[128], dob[11], expiry[11], state[3]; /* "" when not found; dates ISO YYYY-MM-DD */
  char flags[8][24];                             /* unreadable, not_a_license, no_dob, no_expiry, */
  int nflags;                                    /* expired, near_expiry; in that order */
} licence_result;

/* Reads a licence from its OCR text (front and back may be concatenated) and the OCR
 * confidence (0..1), judging expiry against now_ms (epoch ms, from clock_now_ms()):
 *   confidence < 0.6 or no text     -> failed, [unreadable]; nothing else is read
 *   no government-ID marker         -> failed, [not_a_license]; nothing else is read
 *   neither birth date nor expiry   -> failed, [no_dob, no_expiry]
 *   expiry before today             -> failed, [expired] (+ no_dob when missing)
 *   expiry within 30 days           -> review, [near_expiry]
 *   exactly one of them missing     -> review, [no_dob] or [no_expiry]
 *   otherwise                       -> passed
 * Name and state are best-effort and never change the status. text may be NULL. "error"
 * is set only when memory runs out. */
void recognize_licence(const char *text, double confidence, int64_t now_ms, licence_result *out);

typedef struct insurance_result {
  char status[16]; /* "active", "expired", "review", "error" */
  char carrier[128], policy[64], effective[11], expiry[11];
  char coverage[32]; /* whole dollars as digits, e.g. "1000000"; "" when not found */
  int fields_found;  /* how many of the five fields above were found */
  char flags[8][24]; /* no_expiry, expired, near_expiry */
  int nflags;
  char summary[512]; /* insuranceInfo when fields_found >= 2, else "" */
} insurance_result;

/* Reads a certificate of insurance (ACORD 25 or a carrier's own layout) from its text:
 *   no expiry date found     -> review, [no_expiry]
 *   expiry before today      -> expired, [expired]
 *   expiry within 30 days    -> review, [near_expiry]
 *   otherwise                -> active
 * summary reads like "State Farm, policy ABC-123, effective 2026-01-01, expires 2027-01-01,
 * coverage $1,000,000", leaving out what was not found. text may be NULL. "error" is set only
 * when memory runs out. */
void recognize_insurance(const char *text, int64_t now_ms, insurance_result *out);

#endif
