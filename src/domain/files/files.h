/* GET /files/:key, the only way to read a stored file: the URL's signature and expiry are
 * checked (403 otherwise), then the bytes are served with their type. */
#ifndef DOMAIN_FILES_H
#define DOMAIN_FILES_H
#include "domain/domain.h"

extern const domain_def files_domain;

#endif
