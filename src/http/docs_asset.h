/* The API reference page's script (Redoc's standalone bundle), embedded at build time. */
#ifndef HTTP_DOCS_ASSET_H
#define HTTP_DOCS_ASSET_H

/* The bundle's bytes run from hs_redoc_js to hs_redoc_js_end (exclusive). */
extern const char hs_redoc_js[], hs_redoc_js_end[];

#endif
