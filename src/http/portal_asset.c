/* The staff portal's bundle (build/portal/portal.js and portal.css, built by esbuild from
 * portal/src by the Makefile), embedded in the binary so GET /portal loads nothing from another
 * host. The Makefile makes this object wait for both files. */
#include "http/portal_asset.h"

#define PORTAL_ASSET(sym, file)                                                                                        \
  __asm__(".section .rodata\n"                                                                                         \
          ".balign 16\n"                                                                                               \
          ".globl " #sym "\n" #sym ":\n"                                                                               \
          ".incbin \"" file "\"\n"                                                                                     \
          ".globl " #sym "_end\n" #sym "_end:\n"                                                                       \
          ".byte 0\n"                                                                                                  \
          ".previous\n")

PORTAL_ASSET(hs_portal_js, "build/portal/portal.js");
PORTAL_ASSET(hs_portal_css, "build/portal/portal.css");
