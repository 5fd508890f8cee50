"""The money-conservation check (issue 30, docs/decisions.md "Provider balances"): after the
payment and payout tests, every cent a server's customers were charged is accounted for.

    charged - refunded - lost to disputes
        = transferred (sent - reversed, as the processor's transfer objects say)
        + the platform's share (for each captured payment: charged - refunded - lost - what its
          transfer earns the provider now; plus every Preferred Pro fee billed)
        + what providers are still to be paid (job and tip transfers scheduled, waiting for the
          account, on hold or failed)
        + the providers' balances (0, or negative while one owes the platform)

Charged is what was captured: the amount of each PAID or REFUNDED payment of kind job, tip or
duplicate (a job's history included); refunded its refunded_cents; lost its lost_cents. A
balance is read from GET /providers/me/payouts (`totals.balance`, with a token of the provider
signed by the server's own secret) where the provider can still be asked, else from what
payout_debts and the unpaid fees say it owes.

`assert_money_conserved(server, fake=None)` waits for the server's background work to settle,
then checks the identity to the cent; fake is the FakeStripe the server's Stripe client talks
to (None: the simulated processor, whose objects are in processor_sim_objects). When it does
not hold, the failure names the providers whose part breaks it and the transfers whose record
and processor object disagree.
"""
import datetime
import json

from conftest import Api
from helpers import eventually
from staff_helpers import forge
from test_system import db_rows

UNPAID = ("scheduled", "waiting_for_account", "on_hold", "failed")


def _db(server, sql):
    return db_rows(server.env["DATABASE_URL"], server.data_dir, sql)


def _cents(dollars):
    return int(round(float(dollars) * 100))


def _unsettled(server):
    """Requests whose outcome is not recorded yet: the identity cannot hold across them."""
    return _db(server, "SELECT 'transfer', id, pending_op FROM payout_transfers WHERE pending_op IS NOT NULL "
                       "UNION ALL SELECT 'payment', id, pending_op FROM payments WHERE pending_op = 'refund'")


def _processor_transfers(server, fake):
    """Every transfer object the processor holds for this server's connected accounts:
    id -> (destination, amount, amount_reversed, metadata)."""
    if fake is None:
        rows = _db(server, "SELECT data FROM processor_sim_objects WHERE kind = 'transfer'")
        found = [json.loads(r[0]) for r in rows]
    else:  # the fake is shared by the servers of a module: only this server's accounts
        accounts = {r[0] for r in _db(server, "SELECT processor_account_id FROM payout_accounts")}
        accounts |= {r[0] for r in _db(server, "SELECT DISTINCT destination FROM payout_transfers "
                                               "WHERE destination IS NOT NULL AND destination <> ''")}
        found = [t for acct in sorted(accounts) for t in fake.transfers(acct)]
    return {t["id"]: (t["destination"], int(t["amount"]), int(t.get("amount_reversed") or 0), t.get("metadata") or {})
            for t in found}


def _api_balance(api, provider_id, now_s):
    """The provider's totals.balance in cents, or None when it cannot be asked (erased)."""
    token = forge(api.server, {"id": provider_id, "role": "provider", "iat": now_s, "exp": now_s + 3600})
    r = api.get("/providers/me/payouts", token=token, params={"limit": 1})
    if r.status_code != 200:
        return None
    return _cents(r.json()["totals"]["balance"])


def money_ledger(server, fake=None):
    """Both sides of the identity, in cents, with what each provider contributes to them."""
    pays = _db(server, "SELECT id, kind, amount_cents, refunded_cents, lost_cents FROM payments "
                       "WHERE kind IN ('job', 'tip', 'duplicate') AND status IN ('PAID', 'REFUNDED')")
    transfers = _db(server, "SELECT id, provider_id, COALESCE(payment_id, ''), kind, amount_cents, fee_cents, "
                            "netted_cents, sent_cents, reversed_cents, debited_cents, status, "
                            "COALESCE(processor_transfer_id, ''), COALESCE(job_id, '') FROM payout_transfers")
    fees = _db(server, "SELECT provider_id, SUM(amount_cents) FROM payout_fees GROUP BY provider_id")
    fee_records = _db(server, "SELECT provider_id, SUM(amount_cents) FROM payout_transfers "
                              "WHERE kind = 'fee' AND status IN ('scheduled', 'paid') GROUP BY provider_id")
    debts = _db(server, "SELECT provider_id, SUM(amount_cents) FROM payout_debts WHERE status <> 'cancelled' "
                        "GROUP BY provider_id")
    statuses = dict(_db(server, "SELECT id, kind || ' ' || status FROM payments"))
    accounts = dict(_db(server, "SELECT processor_account_id, provider_id FROM payout_accounts"))
    processor = _processor_transfers(server, fake)

    tr = [dict(zip(("id", "provider", "payment", "kind", "amount", "fee", "netted", "sent", "reversed", "debited",
                    "status", "processor_id", "job"), row)) for row in transfers]
    for t in tr:
        for k in ("amount", "fee", "netted", "sent", "reversed", "debited"):
            t[k] = int(t[k])
    earns = {t["payment"]: t["amount"] for t in tr if t["kind"] in ("job", "tip") and t["payment"]}
    captured = {p[0]: (p[1], int(p[2]), int(p[3]), int(p[4])) for p in pays}

    charged = sum(c for _, c, _, _ in captured.values())
    refunded = sum(r for _, _, r, _ in captured.values())
    lost = sum(lo for _, _, _, lo in captured.values())
    earned_now = sum(earns.get(pid, 0) for pid in captured)
    fees_billed = sum(int(n) for _, n in fees)
    platform = charged - refunded - lost - earned_now + fees_billed
    unpaid = sum(t["amount"] for t in tr if t["kind"] in ("job", "tip") and t["status"] in UNPAID)
    transferred = sum(a - rv for _, a, rv, _ in processor.values())

    # each provider's part: what its transfers earn = sent - reversed + fees billed + unpaid + balance
    providers = {t["provider"] for t in tr} | {p for p, _ in fees} | {p for p, _ in debts}
    owed = {p: 0 for p in providers}
    for p, n in fees + fee_records + debts:
        owed[p] += int(n)
    api = Api(server)
    now_s = _server_now_s(api)
    balance, balance_sql, asked = {}, {}, {}
    for p in sorted(providers):
        balance_sql[p] = -owed[p] if owed[p] > 0 else 0
        asked[p] = _api_balance(api, p, now_s)
        balance[p] = asked[p] if asked[p] is not None else balance_sql[p]
    balances = sum(balance.values())

    part = {p: {"earned": 0, "sent": 0, "fees_billed": 0, "unpaid": 0, "balance": balance[p], "owed_sql": owed[p],
                "balance_api": asked[p]} for p in providers}
    for t in tr:
        if t["kind"] in ("job", "tip") and t["payment"] in captured:
            part[t["provider"]]["earned"] += t["amount"]
        if t["kind"] in ("job", "tip") and t["status"] in UNPAID:
            part[t["provider"]]["unpaid"] += t["amount"]
    for p, n in fees:
        part[p]["fees_billed"] += int(n)
    orphans = []
    for pid, (dest, a, rv, meta) in processor.items():
        who = accounts.get(dest)
        if who in part:
            part[who]["sent"] += a - rv
        else:
            orphans.append((pid, dest, a, rv, meta))
    return {
        "charged": charged, "refunded": refunded, "lost": lost, "transferred": transferred, "platform": platform,
        "earned_now": earned_now, "fees_billed": fees_billed, "unpaid": unpaid, "balances": balances,
        "providers": part, "transfers": tr, "processor": processor, "orphans": orphans, "captured": captured,
        "statuses": statuses,
    }


def _server_now_s(api):
    """The service's clock, in seconds (tokens are checked against it)."""
    now = datetime.datetime.strptime(api.advance_clock(0), "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(now.replace(tzinfo=datetime.timezone.utc).timestamp())


def _explain(ledger):
    """What breaks the identity: providers whose part does not add up, transfers whose record and
    processor object disagree, processor transfers nobody recorded, balances the API and the
    records disagree on."""
    lines = []
    for p, s in sorted(ledger["providers"].items()):
        rhs = s["sent"] + s["fees_billed"] + s["unpaid"] + s["balance"]
        if s["earned"] != rhs or (s["balance_api"] is not None and s["balance_api"] !=
                                  (-s["owed_sql"] if s["owed_sql"] > 0 else 0)) or s["owed_sql"] < 0:
            lines.append(f"provider {p}: transfers earn {s['earned']} != sent-reversed {s['sent']} + fees billed "
                         f"{s['fees_billed']} + unpaid {s['unpaid']} + balance {s['balance']} (= {rhs}); "
                         f"owed by the records {s['owed_sql']}, balance by the API {s['balance_api']}")
            for t in ledger["transfers"]:
                if t["provider"] == p:
                    obj = ledger["processor"].get(t["processor_id"])
                    lines.append(f"    transfer {t['id']} {t['kind']} job {t['job']} payment {t['payment'] or '-'} "
                                 f"{t['status']}: amount {t['amount']} fee {t['fee']} netted {t['netted']} sent "
                                 f"{t['sent']} reversed {t['reversed']} debited {t['debited']}; processor "
                                 f"{t['processor_id'] or '-'} {obj[1:3] if obj else '-'}; payment "
                                 f"{ledger['statuses'].get(t['payment'], 'missing') if t['payment'] else '-'}")
    for t in ledger["transfers"]:
        obj = ledger["processor"].get(t["processor_id"]) if t["processor_id"] else None
        if t["processor_id"] and (obj is None or (obj[1], obj[2]) != (t["sent"], t["reversed"])):
            lines.append(f"transfer {t['id']} ({t['kind']}, job {t['job']}): recorded sent {t['sent']} reversed "
                         f"{t['reversed']}, the processor's {t['processor_id']}: {obj[1:3] if obj else 'missing'}")
        if t["kind"] in ("job", "tip") and t["payment"] and t["payment"] not in ledger["captured"]:
            what = ledger["statuses"].get(t["payment"])
            lines.append(f"transfer {t['id']} ({t['kind']}, job {t['job']}, {t['status']}, {t['amount']}) of payment "
                         f"{t['payment']}, " + (f"which is {what}, not captured" if what else "which no longer exists"))
    for pid, dest, a, rv, meta in ledger["orphans"]:
        lines.append(f"processor transfer {pid} to {dest} ({a} sent, {rv} reversed, metadata {meta}) of no provider")
    return lines


def assert_money_conserved(server, fake=None):
    """Checks the identity on server's whole database and its processor's objects."""
    api = Api(server)
    api.wait_queue_idle(timeout=30)
    eventually(lambda: _unsettled(server), 30, "every processor request settled", interval=0.2,
               until=lambda rows: not rows)
    api.wait_queue_idle(timeout=30)
    ledger = money_ledger(server, fake)
    left = ledger["charged"] - ledger["refunded"] - ledger["lost"]
    right = ledger["transferred"] + ledger["platform"] + ledger["unpaid"] + ledger["balances"]
    problems = _explain(ledger)
    assert left == right and not problems, (
        f"money not conserved on the server at {server.url} ({server.env['DATABASE_URL']}): charged "
        f"{ledger['charged']} - refunded {ledger['refunded']} - lost {ledger['lost']} = {left}, but transferred "
        f"{ledger['transferred']} + platform {ledger['platform']} (fees billed {ledger['fees_billed']}, providers "
        f"earn {ledger['earned_now']}) + unpaid {ledger['unpaid']} + balances {ledger['balances']} = {right} "
        f"(cents)\n" + "\n".join(problems))
    return ledger


def assert_all_conserved(pairs):
    """assert_money_conserved for each (server, fake) of pairs, all of them checked before one
    failure names every server whose money does not add up."""
    problems = []
    for server, fake in pairs:
        try:
            assert_money_conserved(server, fake)
        except AssertionError as e:
            problems.append(str(e))
    assert not problems, "\n\n".join(problems)
