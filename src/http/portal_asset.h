/* The staff portal's script and style sheet (portal/src, bundled by esbuild), embedded at build
 * time. */
#ifndef HTTP_PORTAL_ASSET_H
#define HTTP_PORTAL_ASSET_H

/* Each asset's bytes run from its symbol to <symbol>_end (exclusive). */
extern const char hs_portal_js[], hs_portal_js_end[];
extern const char hs_portal_css[], hs_portal_css_end[];

#endif
