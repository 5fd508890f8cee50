/* The files domain's declaration (domain/domain.h). */
#include "domain/files/files.h"
#include "domain/files/files_api.h"

const domain_def files_domain = {.name = "files", .routes = files_routes};
