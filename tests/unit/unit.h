/* What every unit test file shares: cmocka, and its main() written once (UNIT_MAIN). */
#ifndef TESTS_UNIT_UNIT_H
#define TESTS_UNIT_UNIT_H
/* cmocka.h needs these four headers first */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

/* main(): runs the listed tests (cmocka_unit_test(...), ...) as one group with its setup and
 * teardown (NULL: none). */
#define UNIT_MAIN(setup, teardown, ...)                                                                                \
  int main(void) {                                                                                                     \
    const struct CMUnitTest tests[] = {__VA_ARGS__};                                                                   \
    return cmocka_run_group_tests(tests, setup, teardown);                                                             \
  }

#endif
