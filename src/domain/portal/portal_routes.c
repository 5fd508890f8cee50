/* Routes of the staff portal: its page at /portal and at every address under it (the app
 * routes those itself, with the History API), and its two assets, which win over the page. */
#include "domain/portal/portal_api.h"

const hs_route portal_routes[] = {
    {HS_GET, "/portal", api_portal_page, ROLE_OPEN, .flags = ROUTE_PAGE,
     .summary = "The staff portal (a browser application)", .response = "text/html"},
    {HS_GET, "/portal/portal.js", api_portal_asset, ROLE_OPEN, .summary = "The staff portal's script",
     .response = "application/javascript"},
    {HS_GET, "/portal/portal.css", api_portal_asset, ROLE_OPEN, .summary = "The staff portal's style sheet",
     .response = "text/css"},
    {HS_GET, "/portal/*path", api_portal_page, ROLE_OPEN, .flags = ROUTE_PAGE,
     .summary = "The staff portal at one of its screens' addresses (the same page: the app shows the screen)",
     .response = "text/html"},
    {0},
};
