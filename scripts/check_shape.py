#!/usr/bin/env python3
"""Checks that the tree keeps the shape docs/architecture.md describes; `make test` runs it.

Fails (exit 1, one line per problem) when:
- domains include each other in a circle (src/domain/<a>/ including "domain/<b>/..." is an
  arrow a -> b; the files directly under src/domain/ are the shared floor every domain may use,
  and must themselves include no domain);
- SQL sits outside a store: in src/domain/, a string literal that starts a statement (SELECT,
  INSERT INTO, UPDATE ... SET, DELETE FROM, WITH ... AS) is allowed only in files named
  *_store.c; outside src/domain/, only in src/db/ and in the infrastructure modules that own a
  table of their own (an owner in the ownership map below);
- a table is written outside its owner. src/domain/tables.json maps every table to the one file
  that owns it and, for a table whose columns are split, the columns other stores own (groups)
  and those any of them may set (shared). In each .c file under src/, adjacent string literals
  (and the macro names between them) are joined into one statement, and every INSERT INTO t,
  DELETE FROM t and UPDATE t SET in it is checked: t must be in the map; an INSERT or a DELETE
  must be in t's owner; an UPDATE must be in its owner or a group's store, and each column it
  sets (the assignments between SET and the top-level WHERE, FROM or RETURNING) must be the
  writer's: a group store's own columns, or for the owner any column no group holds, or a shared
  one. A statement or column named by a %s placeholder is composed at run time and not checked.
  The map must also list every table the migrations (or a CREATE TABLE in src/) leave in the
  schema, and no other;
- a domain includes another domain's store or api header (only <domain>.h is public);
- a file of a lower layer includes a higher one (core <- db, ext <- http <- domain <- main:
  no core file includes db/ext/http/domain, no db or ext file includes http/domain, no http
  file includes a domain);
- a route row (`const hs_route <name>[] = {`) is declared outside a *_routes.c file;
- a store (*_store.c, *_store.h) includes an http/ header: stores never reach up into HTTP
  (a list's page is db/page.h's db_page);
- a domain registers background work, a periodic task, request hooks or a one-shot event kind
  itself (queue_register, queue_register_heavy, queue_every, hs_add_hooks,
  events_register_oneshot called in src/domain/): they are rows of its descriptor (domain_def's
  jobs, hooks and oneshots), which src/domains.c registers.

Usage: scripts/check_shape.py [--graph]   (--graph prints the domains' arrows)
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SRC = os.path.join(ROOT, "src")
TABLES = os.path.join(SRC, "domain", "tables.json")
MIGRATIONS = os.path.join(ROOT, "migrations")
LAYERS = {"core": 0, "db": 1, "ext": 1, "http": 2, "domain": 3}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SQL = re.compile(r'"\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\s|DELETE\s+FROM\s|WITH\s+\w+\s+AS\s)')
# a call (not the definition: a call is not preceded by the function's return type)
REGISTRATION = re.compile(r"(?<!void )\b(queue_register|queue_register_heavy|queue_every|hs_add_hooks"
                          r"|events_register_oneshot)\s*\(")
ROUTE_TABLE = re.compile(r"^\s*(?:static\s+)?const\s+hs_route\s+\w+\s*\[\s*\]\s*=", re.M)
LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
GLUE = re.compile(r"(?:\s|\\\n|[A-Z_][A-Z0-9_]*)*")  # between adjacent literals: spaces, macro names
WRITE = re.compile(r"\b(?:(INSERT\s+INTO|DELETE\s+FROM)\s+(%s|\w+)|UPDATE\s+(%s|\w+)(?:\s+(?:AS\s+)?\w+)?\s+SET\s)")
SET_END = re.compile(r"(WHERE|FROM|RETURNING)\b")
SCHEMA = re.compile(r"\b(?:CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)|DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(\w+)"
                    r"|ALTER\s+TABLE\s+(\w+)\s+RENAME\s+TO\s+(\w+))", re.I)


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


def statements(code):
    """(line, text) of each run of adjacent string literals, joined (macro names kept)."""
    runs, start, text, end = [], None, "", None
    for m in LITERAL.finditer(code):
        if start is not None and GLUE.fullmatch(code, end, m.start()):
            text += code[end:m.start()].replace("\\\n", " ") + m.group(1)
        else:
            if start is not None:
                runs.append((code[:start].count("\n") + 1, text))
            start, text = m.start(), m.group(1)
        end = m.end()
    if start is not None:
        runs.append((code[:start].count("\n") + 1, text))
    return runs


def set_columns(text):
    """The columns assigned by the SET clause text starts with: split at top-level commas (not in
    parentheses or quotes), up to the top-level WHERE, FROM or RETURNING."""
    cols, depth, quoted, part, i = [], 0, False, "", 0
    while i < len(text):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) \
                and SET_END.match(text, i):
            break
        if not quoted and depth == 0 and ch == ",":
            cols.append(part)
            part = ""
        else:
            part += ch
        i += 1
    cols.append(part)
    return [m.group(1) for m in (re.match(r"(?:\s*[A-Z_][A-Z0-9_]*\s)*\s*(\w+|%s)\s*=", c) for c in cols) if m]


def writes(code):
    """(line, kind, table, columns set) of each INSERT INTO, DELETE FROM and UPDATE ... SET."""
    for line, text in statements(code):
        for m in WRITE.finditer(text):
            if m.group(1):
                yield line, m.group(1).split()[0], m.group(2), []
            else:
                yield line, "UPDATE", m.group(3), set_columns(text[m.end():])


def load_map(problems):
    """The ownership map (src/domain/tables.json), its own consistency checked."""
    import json
    with open(TABLES, encoding="utf-8") as f:
        tables = json.load(f)["tables"]
    for table, entry in tables.items():
        stores = [entry["owner"]] + list(entry.get("groups", {}))
        for store in stores:
            if not os.path.isfile(os.path.join(SRC, store)):
                problems.append(f"domain/tables.json: {table}: {store} is no file under src/")
        seen = {}
        for store, cols in entry.get("groups", {}).items():
            for col in cols:
                if col in seen or col in entry.get("shared", []):
                    problems.append(f"domain/tables.json: {table}.{col} is in two groups")
                seen[col] = store
    return tables


def check_write(rel, line, kind, table, cols, tables, problems):
    if table == "%s":
        return
    entry = tables.get(table)
    if entry is None:
        problems.append(f"{rel}:{line}: writes {table}, which src/domain/tables.json does not list")
        return
    owner, groups, shared = entry["owner"], entry.get("groups", {}), entry.get("shared", [])
    if rel == owner and kind != "UPDATE":
        return
    if kind != "UPDATE" or (rel != owner and rel not in groups):
        problems.append(f"{rel}:{line}: {kind} of {table} outside its owner {owner} (src/domain/tables.json)")
        return
    for col in cols:
        holder = next((s for s, c in groups.items() if col in c), owner)
        if col != "%s" and col not in shared and holder != rel:
            problems.append(f"{rel}:{line}: sets {table}.{col}, which {holder} owns (src/domain/tables.json)")


def schema_tables(sources_sql):
    """The tables the migrations leave (per engine, in order), and those created in src/."""
    found = set()
    for engine in sorted(os.listdir(MIGRATIONS)):
        folder = os.path.join(MIGRATIONS, engine)
        if not os.path.isdir(folder):
            continue
        tables = set()
        for name in sorted(os.listdir(folder)):
            if name.endswith(".sql"):
                text = strip_sql_comments(open(os.path.join(folder, name), encoding="utf-8").read())
                for m in SCHEMA.finditer(text):
                    if m.group(1):
                        tables.add(m.group(1).lower())
                    elif m.group(2):
                        tables.discard(m.group(2).lower())
                    else:
                        tables.discard(m.group(3).lower())
                        tables.add(m.group(4).lower())
        found |= tables
    for text in sources_sql:
        found |= {m.group(1).lower() for m in SCHEMA.finditer(text) if m.group(1)}
    return found


def strip_sql_comments(text):
    return re.sub(r"--[^\n]*", "", text)


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
    tables = load_map(problems)
    own_tables = {e["owner"] for e in tables.values() if not e["owner"].startswith("domain/")}
    created = []
    for rel, text in sources():
        code = strip_comments(text)
        if rel.endswith(".c"):
            for line, kind, table, cols in writes(code):
                check_write(rel, line, kind, table, cols, tables, problems)
            created += [t for _, t in statements(code) if "CREATE TABLE" in t]
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
                layer == "db" or rel in own_tables
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
    schema = schema_tables(created)
    for table in sorted(schema - set(tables)):
        problems.append(f"migrations: table {table} is not in src/domain/tables.json (give it an owner)")
    for table in sorted(set(tables) - schema):
        problems.append(f"src/domain/tables.json: {table} is no table of the schema (migrations)")
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
