/* Shared by the libFuzzer targets in this directory (docs/internals/fuzzing.md).
 *
 * Each target is one fuzz_<name>.c with LLVMFuzzerTestOneInput, linked against every object of
 * src/ except main.c, built with clang-14 under ASan and UBSan. A target checks more than "no
 * crash": where a parser has a property that must hold for every input (the same parts
 * whatever the chunking, a date that survives a round trip, a token accepted only with a
 * valid signature), it aborts when the property fails, so libFuzzer keeps the input. */
#ifndef TESTS_FUZZ_FUZZ_H
#define TESTS_FUZZ_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Configuration for a test environment with a private DATA_DIR (under TMPDIR, removed at
 * exit), a fixed JWT secret and logs off. Call once, from LLVMFuzzerInitialize. */
void fuzz_setup(void);
/* The fixed "now" of the targets that judge dates (2026-06-15T12:00:00Z). */
#define FUZZ_NOW_MS 1781524800000LL
/* The JWT secret fuzz_setup() configures. */
#define FUZZ_JWT_SECRET "fuzz-secret-fuzz-secret-fuzz-secret-0123"

/* Aborts with a message when cond is false: a property of the parser failed. */
#define FUZZ_CHECK(cond, ...)                                                                                          \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      fprintf(stderr, "fuzz property failed: %s: ", #cond);                                                            \
      fprintf(stderr, __VA_ARGS__);                                                                                    \
      fputc('\n', stderr);                                                                                             \
      abort();                                                                                                         \
    }                                                                                                                  \
  } while (0)

/* Aborts unless d is "" or an ISO calendar date YYYY-MM-DD (what names it in the message). */
void fuzz_check_iso_date(const char *what, const char *d);
/* A NUL-terminated heap copy of data (free()). */
char *fuzz_strndup(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
