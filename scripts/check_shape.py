#!/usr/bin/env python3
"""Checks that the tree keeps the shape docs/architecture.md describes; `make test` runs it.

Fails (exit 1, one line per problem) when:
- domains include each other in a circle (src/domain/<a>/ including "domain/<b>/..." is an
  arrow a -> b; the files directly under src/domain/ are the shared floor every domain may use,
  and must themselves include no domain);
- SQL sits outside a store: in src/domain/, a string literal that starts a statement (SELECT,
  INSERT INTO, UPDATE ... SET, DELETE FROM, WITH ... AS) is allowed only in files named
  *_store.c; outside src/domain/,
  only in src/db/ and in the infrastructure modules that own a table of their own (OWN_TABLES);
- a domain includes another domain's store or api header (only <domain>.h is public);
- a file of a lower layer includes a higher one (core <- db, ext <- http <- domain <- main:
  no core file includes db/ext/http/domain, no db or ext file includes http/domain, no http
  file includes a domain);
- a route row (`const hs_route <name>[] = {`) is declared outside a *_routes.c file;
- a store (*_store.c, *_store.h) includes an http/ header: stores never reach up into HTTP
  (a list's page is db/page.h's db_page);
- a domain registers background work, a periodic task or request hooks itself
  (queue_register, queue_register_heavy, queue_every, hs_add_hooks in src/domain/): they are
  rows of its descriptor (domain_def's jobs and hooks), which src/domains.c registers.

Usage: scripts/check_shape.py [--graph]   (--graph prints the domains' arrows)
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SRC = os.path.join(ROOT, "src")

# Modules outside src/domain that own a table and its SQL (each documented in its header).
OWN_TABLES = {
    "http/idempotency.c",  # idempotency_keys
    "http/ratelimit.c",    # rate_limits
    "ext/queue.c",         # job_queue
    "ext/paysim.c",        # processor_sim_objects (the simulated payment processor)
}
LAYERS = {"core": 0, "db": 1, "ext": 1, "http": 2, "domain": 3}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SQL = re.compile(r'"\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|WITH\s+\w+\s+AS\s)')
REGISTRATION = re.compile(r"\b(queue_register|queue_register_heavy|queue_every|hs_add_hooks)\s*\(")
ROUTE_TABLE = re.compile(r"^\s*(?:static\s+)?const\s+hs_route\s+\w+\s*\[\s*\]\s*=", re.M)


def sources():
    for base, _, files in os.walk(SRC):
        for name in sorted(files):
            if name.endswith((".c", ".h")):
                path = os.path.join(base, name)
                yield os.path.relpath(path, SRC), open(path, encoding="utf-8").read()


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def domain_of(rel):
    """'jobs' for domain/jobs/x.c, '' for the shared floor (domain/x.c), None elsewhere."""
    parts = rel.split("/")
    if parts[0] != "domain":
        return None
    return parts[1] if len(parts) > 2 else ""


def find_cycles(arrows):
    """Every elementary cycle's smallest form, found by depth-first search from each node."""
    cycles = set()
    def walk(start, node, path):
        for nxt in sorted(arrows.get(node, ())):
            if nxt == start:
                i = path.index(min(path))
                cycles.add(tuple(path[i:] + path[:i]))
            elif nxt not in path and nxt > start:
                walk(start, nxt, path + [nxt])
    for start in sorted(arrows):
        walk(start, start, [start])
    return sorted(cycles)


def main():
    problems, arrows = [], {}
    for rel, text in sources():
        code = strip_comments(text)
        layer = rel.split("/")[0]
        mine = domain_of(rel)
        for inc in INCLUDE.findall(code):
            top = inc.split("/")[0]
            if layer in LAYERS and top in LAYERS and LAYERS[top] > LAYERS[layer]:
                problems.append(f"{rel}: includes {inc} (a {layer} file may not include a {top} header)")
            if top == "http" and re.search(r"_store\.[ch]$", rel):
                problems.append(f"{rel}: a store includes {inc} (stores never reach up into HTTP)")
            theirs = domain_of(inc)
            if mine is None or theirs is None:
                continue
            if mine == "" and theirs != "" and not inc.startswith("domain/domain.h"):
                problems.append(f"{rel}: the shared floor of src/domain includes the domain header {inc}")
            if mine and theirs and theirs != mine:
                arrows.setdefault(mine, set()).add(theirs)
                header = os.path.basename(inc)
                if header != f"{theirs}.h":
                    problems.append(f"{rel}: includes {inc}, which is internal to the {theirs} domain "
                                    f"(only domain/{theirs}/{theirs}.h is public)")
        if rel.endswith(".c") and SQL.search(code):
            allowed = rel.endswith("_store.c") if mine is not None else \
                layer == "db" or rel in OWN_TABLES
            if not allowed:
                line = code[:SQL.search(code).start()].count("\n") + 1
                problems.append(f"{rel}:{line}: SQL outside a store")
        if mine is not None and REGISTRATION.search(code):
            line = code[:REGISTRATION.search(code).start()].count("\n") + 1
            problems.append(f"{rel}:{line}: registers {REGISTRATION.search(code).group(1)} itself "
                            "(a row of its domain_def instead)")
        if ROUTE_TABLE.search(code) and not rel.endswith("_routes.c"):
            line = code[:ROUTE_TABLE.search(code).start()].count("\n") + 1
            problems.append(f"{rel}:{line}: a route table outside a *_routes.c file")
    for cycle in find_cycles(arrows):
        problems.append("domains include each other in a circle: " + " -> ".join(cycle + (cycle[0],)))
    if "--graph" in sys.argv:
        for d in sorted(arrows):
            print(f"{d} -> {', '.join(sorted(arrows[d]))}")
    for p in problems:
        print(p)
    if problems:
        print(f"check_shape: {len(problems)} problem(s); see docs/architecture.md")
        return 1
    print("check_shape: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
