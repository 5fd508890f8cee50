"""The plan audit of the API pass: a test server on SQLite appends every statement it prepares,
with its plan, to PLAN_LOG (src/db/sqlite.c; a database without statistics, as the service
runs it), and a statement that reads one of the tables that grow with use whole fails its
module. A full read goes unnoticed on a test's few rows and costs seconds at a million, on
SQLite inside the one writer's turn (docs/performance-history.md, sections 25 and 26); so does a
search by a status or a service alone (BULK_COLUMNS), which reads the bulk of its table."""
import re

# The tables that grow with the marketplace's use.
LARGE = {"users", "providers", "jobs", "quotes", "messages", "notifications", "payments",
         "payout_transfers", "events", "event_recipients", "reviews", "recurring_requests"}

# Statements that read a large table whole on purpose, each with why (a part of its text).
ACCEPTED = {
    "SELECT COUNT(*) FROM ": "a backup's check counts every table's rows",
    "ORDER BY created_at DESC, id LIMIT": "the staff's account lists and searches, newest first",
    "SELECT DISTINCT zip FROM users WHERE seasonal_alerts_enabled": "daily, through its partial index",
    "UPDATE providers SET is_premium = 0": "daily, the subscriptions that ended",
    "UPDATE notifications SET job_id = NULL WHERE job_id IN": "an erasure, rare: an index on job_id would "
                                                               "cost every notification a page",
    "UNION SELECT id FROM payments WHERE idem_key = $2": "a dispute event, rare: an index on idem_key would "
                                                         "cost every payment operation a page",
    "FROM jobs j INDEXED BY jobs_feed_open CROSS JOIN payments p": "the reconciliation's open jobs, through "
                                                                    "their partial index (the feed's)",
}

# Columns whose one value can be the bulk of a table (PAID payments, COMPLETED jobs, every job of a
# service): a search whose only constraints are on these reads that bulk. SQLite plans without
# statistics and takes such an index as readily as one by customer or provider (section 26).
BULK_COLUMNS = {"status", "kind", "service", "match_service"}

# Searches of a large table by bulk columns alone, on purpose, each with why (a part of its text).
ACCEPTED_BULK = {
    "COALESCE(p.hold_expires_at, p.created_at + 604800000) < $1": "the holds due: AUTHORIZED payments (jobs under "
                                                                  "way), every hour",
    "WHERE p.status IN ('AUTHORIZED', 'FAILED') AND": "the reconciliation's AUTHORIZED and FAILED payments",
    "WHERE status = 'on_hold' AND hold_until <= $1": "the transfers on hold",
    "SELECT provider_id, SUM(owed) FROM (SELECT provider_id, amount_cents AS owed FROM payout_fees": "the reconcile "
                                                                                                 "command's balances, "
                                                                                                 "on demand",
    "WHERE service = $1 AND status = 'ACCEPTED' ORDER BY accepted_at DESC LIMIT 50": "the market rate: the newest 50 "
                                                                                     "ACCEPTED quotes (partial index)",
}

SEARCH = re.compile(r"^SEARCH (\S+) USING (?:COVERING )?INDEX \S+ \((.*)\)$")

FROM = re.compile(r'\b(?:FROM|JOIN|UPDATE|INTO)\s+(?:"?\w+"?\.)?"?(\w+)"?(?:\s+(?:AS\s+)?(\w+))?', re.I)
SCAN = re.compile(r"^SCAN (\S+)")
KEYWORDS = {"where", "on", "join", "left", "inner", "cross", "set", "order", "group", "limit", "using",
            "values", "select", "union", "natural", "indexed", "as", "returning", "default", "and"}


def tables_of(sql):
    """Each name a plan may give a table of the statement by (the table's, its alias) -> table."""
    names = {}
    for table, alias in FROM.findall(sql):
        names[table] = table
        if alias and alias.lower() not in KEYWORDS:
            names[alias] = table
    return names


def problems(path):
    """What the plan log at path shows reading a large table whole, or the bulk of it by a status
    or service alone (an empty list when nothing)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        plan, _, sql = line.partition("\t")
        if any(part in sql for part in ACCEPTED):
            continue
        steps = plan.split(" | ")
        subqueries = {s.split()[-1] for s in steps if s.startswith(("CO-ROUTINE ", "MATERIALIZE "))}
        names = tables_of(sql)
        bulk_ok = any(part in sql for part in ACCEPTED_BULK)
        for step in steps:
            m = SCAN.match(step)
            if m and m.group(1) not in subqueries and names.get(m.group(1), m.group(1)) in LARGE:
                found.append(f"{step}: {sql[:300]}")
            m = SEARCH.match(step)
            if m and not bulk_ok and names.get(m.group(1), m.group(1)) in LARGE and \
                    {re.split(r"[=<>]", c)[0] for c in m.group(2).split(" AND ")} <= BULK_COLUMNS:
                found.append(f"{step} (a search by {m.group(2)} alone reads its bulk): {sql[:300]}")
    return sorted(set(found))
