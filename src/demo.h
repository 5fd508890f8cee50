/* `marketplace demo`: demo data for a development database, made through the API itself (so
 * every rule, email, payment and background check runs as for a real client). */
#ifndef DEMO_H
#define DEMO_H

/* Seeds the service answering at base_url ("http://127.0.0.1:PORT") with customers, verified
 * providers and jobs in every state, reading sample files from examples_dir, and prints the
 * logins on stdout. When the demo accounts exist already it prints the logins and changes
 * nothing. Returns the process exit code (0 on success). */
int demo_seed(const char *base_url, const char *examples_dir);

#endif
