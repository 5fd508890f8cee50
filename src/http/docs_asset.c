/* Redoc's standalone bundle (node_modules/redoc/bundles/redoc.standalone.js, installed by
 * `npm ci` from the pinned package-lock.json), embedded in the binary so GET /docs loads
 * nothing from another host. The Makefile makes this object wait for the file. */
#include "http/docs_asset.h"

__asm__(".section .rodata\n"
        ".balign 16\n"
        ".globl hs_redoc_js\n"
        "hs_redoc_js:\n"
        ".incbin \"node_modules/redoc/bundles/redoc.standalone.js\"\n"
        ".globl hs_redoc_js_end\n"
        "hs_redoc_js_end:\n"
        ".byte 0\n"
        ".previous\n");
