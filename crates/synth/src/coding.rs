//! `coding`: a coding agent fixing failing tests in a Python service.
//!
//! The agent reads the failing test and the module under test in parallel (`read_file`, with
//! `cat -n` numbering), reproduces with `bash` (pytest output with a traceback, exit code 1 as
//! a tool error), searches with `rg`, proposes options the user picks from, edits with
//! `edit_file` (sometimes the first edit misses and errors), reruns, and runs the full suite,
//! which surfaces the next failure. The repository is a small world that stays consistent:
//! files read twice show the edits made in between.
//!
//! Planted facts: the task and the user's constraints (message 1), the suspect commit in the
//! first `git log`, a constant read from a module, each failure's error line, each edited file
//! (with and without a leading `./`), each choice the user made and the option rejected, and
//! the release steps asked for last.

use std::collections::BTreeMap;

use compaction::{Conversation, ProbeKind};

use super::build::{camel, fill_text, q, Builder, Call, IdStyle, J};
use super::rng::Rng;
use super::Spec;

struct Domain {
    pkg: &'static str,
    desc: &'static str,
    modules: &'static [(&'static str, &'static str)],
    api_fn: &'static str,
}

/// Packages, each with modules and the noun each module is about.
const DOMAINS: &[Domain] = &[
    Domain {
        pkg: "ledgerline",
        desc: "invoicing and payments service",
        modules: &[
            ("invoices", "invoice"),
            ("refunds", "refund"),
            ("payments", "payment"),
            ("payouts", "payout"),
            ("taxes", "tax_rate"),
            ("ledger", "ledger_entry"),
            ("exports", "statement"),
            ("webhooks", "event"),
            ("customers", "customer"),
            ("discounts", "coupon"),
        ],
        api_fn: "refund_payment",
    },
    Domain {
        pkg: "tidepool",
        desc: "event ingestion pipeline",
        modules: &[
            ("sources", "source"),
            ("parsers", "record"),
            ("batching", "batch"),
            ("scheduler", "job"),
            ("checkpoints", "checkpoint"),
            ("sinks", "sink"),
            ("partitions", "partition"),
            ("dedupe", "fingerprint"),
            ("quotas", "quota"),
            ("alerts", "alert"),
        ],
        api_fn: "ingest_batch",
    },
    Domain {
        pkg: "parcelhub",
        desc: "shipping rates and label API",
        modules: &[
            ("rates", "rate"),
            ("labels", "label"),
            ("carriers", "carrier"),
            ("tracking", "tracking_event"),
            ("addresses", "address"),
            ("customs", "declaration"),
            ("zones", "zone"),
            ("pickups", "pickup"),
            ("returns", "return_label"),
            ("manifests", "manifest"),
        ],
        api_fn: "quote_shipment",
    },
    Domain {
        pkg: "quillstack",
        desc: "headless blogging backend",
        modules: &[
            ("posts", "post"),
            ("slugs", "slug"),
            ("render", "fragment"),
            ("comments", "comment"),
            ("auth", "session"),
            ("media", "asset"),
            ("search", "document"),
            ("feeds", "feed_item"),
            ("authors", "author"),
            ("newsletters", "issue"),
        ],
        api_fn: "publish_post",
    },
];

const FIELDS: &[&str] = &["status", "reference", "external_id", "region", "owner_id", "channel", "kind", "label"];

/// Replace `%name%` markers.
fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("%{k}%"), v);
    }
    out
}

/// Function templates (`%noun%`, `%N%`, `%field%` markers), one snippet each, separated by `# ---` lines in `texts/coding_fillers.txt`.
static FILLERS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| include_str!("texts/coding_fillers.txt").split("\n# ---\n").collect());

/// Test templates (same markers), one snippet each, separated by `# ---` lines in `texts/coding_test_fillers.txt`.
static TEST_FILLERS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| include_str!("texts/coding_test_fillers.txt").split("\n# ---\n").collect());

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    MissingKey,
    Rounding,
    NoneAttr,
    DecimalFloat,
    Pagination,
    NaiveDatetime,
    ZeroDivision,
    IntParse,
}

const KINDS: [Kind; 8] = [
    Kind::MissingKey,
    Kind::Rounding,
    Kind::NoneAttr,
    Kind::DecimalFloat,
    Kind::Pagination,
    Kind::NaiveDatetime,
    Kind::ZeroDivision,
    Kind::IntParse,
];

/// One planted bug: a function with a wrong line, a test that catches it, and the fix.
#[derive(Debug, Clone)]
struct Bug {
    kind: Kind,
    module: &'static str,
    path: String,
    test_path: String,
    func: String,
    test: String,
    /// Function source, with `buggy` as one of its lines.
    func_src: String,
    buggy: String,
    fixed: String,
    /// Index (in `func_src` lines) of the line the traceback points at.
    raise_at: usize,
    /// Test source; `test_at` is the line the traceback points at.
    test_src: String,
    test_at: usize,
    /// `E` lines of the failure (first is the error line).
    e_lines: Vec<String>,
    /// The exception type shown after the location (`KeyError`), or `None` when the assertion
    /// failed in the test itself.
    exc: Option<&'static str>,
    /// The error as the short summary shows it (`KeyError: 'currency'`).
    error: String,
    /// The user's choice: (chosen, rejected, chosen fact, rejected fact).
    choice: (String, String, String, String),
    /// Regression test added with the fix.
    regression: String,
}

fn make_bug(rng: &mut Rng, pkg: &str, module: &'static str, noun: &'static str, kind: Kind) -> Bug {
    let n_cls = camel(noun);
    let path = format!("src/{pkg}/{module}.py");
    let test_path = format!("tests/test_{module}.py");
    let vars = |extra: &[(&str, &str)]| {
        let mut v: Vec<(String, String)> = vec![("noun".into(), noun.into()), ("N".into(), n_cls.clone())];
        v.extend(extra.iter().map(|(a, b)| (a.to_string(), b.to_string())));
        v
    };
    let apply = |t: &str, v: &[(String, String)]| {
        let refs: Vec<(&str, &str)> = v.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        fill(t, &refs)
    };
    match kind {
        Kind::MissingKey => {
            let key = *rng.pick(&["currency", "region", "locale", "tenant_id", "timezone", "channel"]);
            let key_u = key.to_uppercase();
            let v = vars(&[("key", key), ("KEY", &key_u)]);
            let func = apply("%noun%_from_payload", &v);
            Bug {
                kind,
                module,
                path,
                test_path,
                test: apply("test_%noun%_from_legacy_payload_without_%key%", &v),
                func_src: apply(
                    r#"def %noun%_from_payload(payload: dict[str, Any]) -> %N%:
    """Build a %N% from a webhook payload (v1 and v2 senders)."""
    %noun%_id = payload["id"]
    %key% = payload["%key%"]
    created = parse_timestamp(payload.get("created_at"))
    return %N%(id=%noun%_id, %key%=%key%, created_at=created)"#,
                    &v,
                ),
                buggy: apply(r#"    %key% = payload["%key%"]"#, &v),
                fixed: apply(r#"    %key% = payload.get("%key%", DEFAULT_%KEY%)"#, &v),
                raise_at: 3,
                test_src: apply(
                    r#"def test_%noun%_from_legacy_payload_without_%key%():
    payload = load_fixture("%noun%_v1.json")
    %noun% = %noun%_from_payload(payload)
    assert %noun%.%key% == DEFAULT_%KEY%"#,
                    &v,
                ),
                test_at: 2,
                e_lines: vec![format!("KeyError: '{key}'")],
                exc: Some("KeyError"),
                error: format!("KeyError: '{key}'"),
                choice: (
                    format!("fall back to DEFAULT_{key_u} inside {func}"),
                    "backfill the stored v1 payloads with a migration".to_string(),
                    format!("DEFAULT_{key_u}"),
                    "backfill".to_string(),
                ),
                regression: apply(
                    r#"def test_%noun%_from_payload_keeps_explicit_%key%():
    payload = load_fixture("%noun%_v2.json")
    assert %noun%_from_payload(payload).%key% == payload["%key%"]"#,
                    &v,
                ),
                func,
            }
        }
        Kind::Rounding => {
            let k = rng.range(200, 2400);
            let cents = 4 * k + 3;
            let amount = super::build::decimal(cents as i64, 2);
            let got = (cents - 1) / 2;
            let want = cents.div_ceil(2);
            let v = vars(&[("amount", &amount), ("want", &want.to_string())]);
            let func = apply("%noun%_amount_minor", &v);
            Bug {
                kind,
                module,
                path,
                test_path,
                test: apply("test_%noun%_amount_minor_half_rounds_to_even", &v),
                func_src: apply(
                    r#"def %noun%_amount_minor(amount: Decimal, ratio: Decimal) -> int:
    """Amount in minor units (cents) after applying `ratio` (partial operations)."""
    scaled = amount * ratio
    return int(scaled * 100)"#,
                    &v,
                ),
                buggy: "    return int(scaled * 100)".to_string(),
                fixed: r#"    return int((scaled * 100).quantize(Decimal("1"), rounding=ROUND_HALF_EVEN))"#.to_string(),
                raise_at: 3,
                test_src: apply(
                    r#"def test_%noun%_amount_minor_half_rounds_to_even():
    amount = Decimal("%amount%")
    assert %noun%_amount_minor(amount, Decimal("0.5")) == %want%"#,
                    &v,
                ),
                test_at: 2,
                e_lines: vec![
                    format!("assert {got} == {want}"),
                    format!(" +  where {got} = {noun}_amount_minor(Decimal('{amount}'), Decimal('0.5'))"),
                ],
                exc: None,
                error: format!("assert {got} == {want}"),
                choice: (
                    "quantize with ROUND_HALF_EVEN (banker's rounding, what finance reconciles against)".to_string(),
                    "ROUND_HALF_UP".to_string(),
                    "ROUND_HALF_EVEN".to_string(),
                    "ROUND_HALF_UP".to_string(),
                ),
                regression: apply(
                    r#"@pytest.mark.parametrize("amount,expected", [("0.03", 2), ("0.05", 2), ("10.07", 504)])
def test_%noun%_amount_minor_half_even_table(amount, expected):
    assert %noun%_amount_minor(Decimal(amount), Decimal("0.5")) == expected"#,
                    &v,
                ),
                func,
            }
        }
        Kind::NoneAttr => {
            let v = vars(&[]);
            let func = apply("normalize_%noun%_name", &v);
            Bug {
                kind,
                module,
                path,
                test_path,
                test: apply("test_normalize_%noun%_name_without_display_name", &v),
                func_src: apply(
                    r#"def normalize_%noun%_name(record: %N%) -> str:
    """Display name used in exports and notification emails."""
    name = record.display_name.strip()
    return " ".join(part.capitalize() for part in name.split())"#,
                    &v,
                ),
                buggy: "    name = record.display_name.strip()".to_string(),
                fixed: r#"    name = (record.display_name or "").strip()"#.to_string(),
                raise_at: 2,
                test_src: apply(
                    r#"def test_normalize_%noun%_name_without_display_name():
    record = make_%noun%(display_name=None)
    assert normalize_%noun%_name(record) == """#,
                    &v,
                ),
                test_at: 2,
                e_lines: vec!["AttributeError: 'NoneType' object has no attribute 'strip'".to_string()],
                exc: Some("AttributeError"),
                error: "AttributeError: 'NoneType' object has no attribute 'strip'".to_string(),
                choice: (
                    "treat a missing display_name as an empty name in the function".to_string(),
                    "a NOT NULL constraint on display_name".to_string(),
                    "empty name".to_string(),
                    "NOT NULL".to_string(),
                ),
                regression: apply(
                    r#"def test_normalize_%noun%_name_collapses_spaces():
    record = make_%noun%(display_name="  ada   lovelace ")
    assert normalize_%noun%_name(record) == "Ada Lovelace""#,
                    &v,
                ),
                func,
            }
        }
        Kind::DecimalFloat => {
            let pct_n = rng.range(10, 35);
            let pct = pct_n.to_string();
            let want = super::build::decimal(11_000 + 10 * pct_n as i64, 2);
            let v = vars(&[("pct", &pct), ("want", &want)]);
            let func = apply("%noun%_total_with_fee", &v);
            Bug {
                kind,
                module,
                path,
                test_path,
                test: apply("test_%noun%_total_with_fee_applies_surcharge", &v),
                func_src: apply(
                    r#"def %noun%_total_with_fee(subtotal: Decimal, fee: Decimal) -> Decimal:
    """Subtotal plus the handling fee with the %pct%% surcharge."""
    total = subtotal + fee * 1.%pct%
    return total.quantize(CENT)"#,
                    &v,
                ),
                buggy: apply("    total = subtotal + fee * 1.%pct%", &v),
                fixed: apply(r#"    total = subtotal + fee * Decimal("1.%pct%")"#, &v),
                raise_at: 2,
                test_src: apply(
                    r#"def test_%noun%_total_with_fee_applies_surcharge():
    total = %noun%_total_with_fee(Decimal("100.00"), Decimal("10.00"))
    assert total == Decimal("%want%")"#,
                    &v,
                ),
                test_at: 1,
                e_lines: vec!["TypeError: unsupported operand type(s) for *: 'decimal.Decimal' and 'float'".to_string()],
                exc: Some("TypeError"),
                error: "TypeError: unsupported operand type(s) for *: 'decimal.Decimal' and 'float'".to_string(),
                choice: (
                    "a Decimal literal for the surcharge factor".to_string(),
                    "converting the amounts to float".to_string(),
                    "Decimal literal".to_string(),
                    "float".to_string(),
                ),
                regression: apply(
                    r#"def test_%noun%_total_with_fee_zero_fee():
    assert %noun%_total_with_fee(Decimal("19.99"), Decimal("0")) == Decimal("19.99")"#,
                    &v,
                ),
                func,
            }
        }
        Kind::Pagination => {
            let limit = rng.range(20, 60);
            let got = (limit - 1).to_string();
            let limit_s = limit.to_string();
            let v = vars(&[("limit", &limit_s)]);
            let func = apply("paginate_%noun%s", &v);
            Bug {
                kind,
                module,
                path,
                test_path,
                test: apply("test_paginate_%noun%s_returns_full_page", &v),
                func_src: apply(
                    r#"def paginate_%noun%s(items: Sequence[%N%], offset: int, limit: int) -> list[%N%]:
    """One page of %noun%s for the list endpoint."""
    if offset < 0 or limit <= 0:
        raise ValueError("offset must be >= 0 and limit > 0")
    return list(items[offset:offset + limit - 1])"#,
                    &v,
                ),
                buggy: "    return list(items[offset:offset + limit - 1])".to_string(),
                fixed: "    return list(items[offset:offset + limit])".to_string(),
                raise_at: 4,
                test_src: apply(
                    r#"def test_paginate_%noun%s_returns_full_page():
    items = [make_%noun%() for _ in range(200)]
    page = paginate_%noun%s(items, offset=0, limit=%limit%)
    assert len(page) == %limit%"#,
                    &v,
                ),
                test_at: 3,
                e_lines: vec![
                    format!("assert {got} == {limit}"),
                    format!(" +  where {got} = len([{n_cls}(id='{noun}_0001'), ...])"),
                ],
                exc: None,
                error: format!("assert {got} == {limit}"),
                choice: (
                    "fix the slice in the helper".to_string(),
                    "a cursor-based pagination rewrite".to_string(),
                    "slice".to_string(),
                    "cursor".to_string(),
                ),
                regression: apply(
                    r#"def test_paginate_%noun%s_last_partial_page():
    items = [make_%noun%() for _ in range(45)]
    assert len(paginate_%noun%s(items, offset=40, limit=20)) == 5"#,
                    &v,
                ),
                func,
            }
        }
        Kind::NaiveDatetime => {
            let v = vars(&[]);
            let func = apply("stale_%noun%s", &v);
            Bug {
                kind,
                module,
                path,
                test_path,
                test: apply("test_stale_%noun%s_with_aware_timestamps", &v),
                func_src: apply(
                    r#"def stale_%noun%s(items: Iterable[%N%], days: int) -> list[%N%]:
    """%N%s not updated in the last `days` days."""
    cutoff = datetime.utcnow() - timedelta(days=days)
    return [item for item in items if item.updated_at < cutoff]"#,
                    &v,
                ),
                buggy: "    cutoff = datetime.utcnow() - timedelta(days=days)".to_string(),
                fixed: "    cutoff = datetime.now(timezone.utc) - timedelta(days=days)".to_string(),
                raise_at: 3,
                test_src: apply(
                    r#"def test_stale_%noun%s_with_aware_timestamps(frozen_clock):
    old = make_%noun%(updated_at=frozen_clock.now() - timedelta(days=40))
    fresh = make_%noun%(updated_at=frozen_clock.now())
    assert stale_%noun%s([old, fresh], days=30) == [old]"#,
                    &v,
                ),
                test_at: 3,
                e_lines: vec!["TypeError: can't compare offset-naive and offset-aware datetimes".to_string()],
                exc: Some("TypeError"),
                error: "TypeError: can't compare offset-naive and offset-aware datetimes".to_string(),
                choice: (
                    "timezone-aware datetime.now(timezone.utc) everywhere".to_string(),
                    "stripping tzinfo from the stored timestamps".to_string(),
                    "timezone.utc".to_string(),
                    "tzinfo".to_string(),
                ),
                regression: apply(
                    r#"def test_stale_%noun%s_boundary_is_exclusive(frozen_clock):
    edge = make_%noun%(updated_at=frozen_clock.now() - timedelta(days=30))
    assert stale_%noun%s([edge], days=30) == []"#,
                    &v,
                ),
                func,
            }
        }
        Kind::ZeroDivision => {
            let v = vars(&[]);
            let func = apply("%noun%_completion_ratio", &v);
            Bug {
                kind,
                module,
                path,
                test_path,
                test: apply("test_%noun%_completion_ratio_empty_run", &v),
                func_src: apply(
                    r#"def %noun%_completion_ratio(done: int, total: int) -> float:
    """Share of %noun%s processed, for the progress endpoint."""
    ratio = done / total
    return round(ratio, 4)"#,
                    &v,
                ),
                buggy: "    ratio = done / total".to_string(),
                fixed: "    ratio = done / total if total else 0.0".to_string(),
                raise_at: 2,
                test_src: apply(
                    r#"def test_%noun%_completion_ratio_empty_run():
    assert %noun%_completion_ratio(0, 0) == 0.0"#,
                    &v,
                ),
                test_at: 1,
                e_lines: vec!["ZeroDivisionError: division by zero".to_string()],
                exc: Some("ZeroDivisionError"),
                error: "ZeroDivisionError: division by zero".to_string(),
                choice: (
                    "report 0.0 for an empty run".to_string(),
                    "raising a ValueError for total == 0".to_string(),
                    "0.0".to_string(),
                    "ValueError".to_string(),
                ),
                regression: apply(
                    r#"def test_%noun%_completion_ratio_rounds_to_four_places():
    assert %noun%_completion_ratio(1, 3) == 0.3333"#,
                    &v,
                ),
                func,
            }
        }
        Kind::IntParse => {
            let raw = format!("{}.0", rng.range(2, 9));
            let v = vars(&[("raw", &raw)]);
            let func = apply("parse_%noun%_quantity", &v);
            Bug {
                kind,
                module,
                path,
                test_path,
                test: apply("test_parse_%noun%_quantity_from_spreadsheet_export", &v),
                func_src: apply(
                    r#"def parse_%noun%_quantity(raw_qty: str) -> int:
    """Quantity column of the CSV import."""
    qty = int(raw_qty)
    if qty < 0:
        raise ValueError(f"negative quantity: {raw_qty}")
    return qty"#,
                    &v,
                ),
                buggy: "    qty = int(raw_qty)".to_string(),
                fixed: "    qty = int(Decimal(raw_qty))".to_string(),
                raise_at: 2,
                test_src: apply(
                    r#"def test_parse_%noun%_quantity_from_spreadsheet_export():
    assert parse_%noun%_quantity("%raw%") == %raw%"#,
                    &v,
                )
                .replace(&format!("== {raw}"), &format!("== {}", &raw[..raw.len() - 2])),
                test_at: 1,
                e_lines: vec![format!("ValueError: invalid literal for int() with base 10: '{raw}'")],
                exc: Some("ValueError"),
                error: format!("ValueError: invalid literal for int() with base 10: '{raw}'"),
                choice: (
                    "parse through Decimal and reject fractional quantities".to_string(),
                    "float() parsing".to_string(),
                    "Decimal".to_string(),
                    "float()".to_string(),
                ),
                regression: apply(
                    r#"def test_parse_%noun%_quantity_rejects_fractions():
    with pytest.raises(ValueError):
        parse_%noun%_quantity("2.5")"#,
                    &v,
                ),
                func,
            }
        }
    }
}

/// A Python source file the agent can read; edits change it.
#[derive(Debug, Clone)]
struct File {
    text: String,
    /// Test names, for test files.
    tests: Vec<String>,
}

struct World {
    pkg: &'static str,
    desc: &'static str,
    api_fn: &'static str,
    files: BTreeMap<String, File>,
    bugs: Vec<Bug>,
    /// `MAX_REFERENCE_LEN` per module path.
    max_ref: BTreeMap<String, u64>,
    commits: Vec<(String, String)>,
    suspect: usize,
    day0: i64,
}

fn module_header(
    pkg: &str,
    module: &str,
    desc: &str,
    nouns: &[String],
    max_ref: u64,
    extra_consts: &[String],
) -> String {
    let mut s = format!(
        "\"\"\"{} for {pkg}, the {desc}.\n\nEverything here is synchronous; async helpers live at the bottom and only\nwrap the event bus.\n\"\"\"\n\nfrom __future__ import annotations\n\nimport logging\nfrom collections import defaultdict\nfrom dataclasses import dataclass\nfrom datetime import datetime, timedelta, timezone\nfrom decimal import ROUND_HALF_EVEN, Decimal\nfrom typing import Any, Iterable, Mapping, Sequence\n\nfrom sqlalchemy import func, select\nfrom sqlalchemy.orm import Session\n\nfrom {pkg}.events import EventBus, utcnow\nfrom {pkg}.models import {}\nfrom {pkg}.timeutil import parse_timestamp\n\nlog = logging.getLogger(__name__)\n\nDEFAULT_CURRENCY = \"EUR\"\nCENT = Decimal(\"0.01\")\nMAX_REFERENCE_LEN = {max_ref}\nTOPIC = \"{pkg}.{module}\"\n",
        super::build::capitalize(&module.replace('_', " ")) + " helpers",
        nouns.iter().map(|n| camel(n)).chain(nouns.iter().map(|n| format!("{}Create", camel(n)))).collect::<Vec<_>>().join(", "),
    );
    for c in extra_consts {
        s.push_str(c);
        s.push('\n');
    }
    s
}

impl World {
    fn new(rng: &mut Rng, n_bugs: usize) -> World {
        let d = rng.pick(DOMAINS);
        let mut modules: Vec<(&'static str, &'static str)> = d.modules.to_vec();
        rng.shuffle(&mut modules);
        let mut kinds = KINDS.to_vec();
        rng.shuffle(&mut kinds);
        let mut bugs = Vec::new();
        for i in 0..n_bugs {
            let (m, noun) = modules[i % modules.len()];
            // Vary the kind when a module comes round again, so no function repeats.
            let kind = kinds[(i + i / modules.len()) % kinds.len()];
            bugs.push(make_bug(rng, d.pkg, m, noun, kind));
        }
        let mut files = BTreeMap::new();
        let mut max_ref = BTreeMap::new();
        for (m, noun) in &modules {
            let planted: Vec<&Bug> = bugs.iter().filter(|b| b.module == *m).collect();
            let path = format!("src/{}/{m}.py", d.pkg);
            let mr = 16 * rng.range(2, 8);
            max_ref.insert(path.clone(), mr);
            let mut consts = Vec::new();
            for b in &planted {
                if b.kind == Kind::MissingKey {
                    let key = b.buggy.trim().split(' ').next().unwrap_or("key").to_uppercase();
                    let default = match key.as_str() {
                        "CURRENCY" => "\"EUR\"",
                        "REGION" => "\"eu-west\"",
                        "LOCALE" => "\"en-GB\"",
                        "TIMEZONE" => "\"UTC\"",
                        "CHANNEL" => "\"web\"",
                        _ => "\"default\"",
                    };
                    consts.push(format!("DEFAULT_{key} = {default}"));
                }
            }
            let other_nouns: Vec<String> = d.modules.iter().map(|(_, n)| n.to_string()).filter(|n| n != noun).collect();
            let mut nouns = vec![noun.to_string()];
            nouns.push(rng.pick(&other_nouns).clone());
            nouns.dedup();
            let header = module_header(d.pkg, m, d.desc, &nouns, mr, &consts);
            let text = python_module(rng, header, &nouns, &planted);
            files.insert(path, File { text, tests: Vec::new() });
            let (ttext, tests) = test_module(rng, d.pkg, m, noun, &planted);
            files.insert(format!("tests/test_{m}.py"), File { text: ttext, tests });
        }
        files.insert(format!("src/{}/models.py", d.pkg), File { text: models_py(rng, d), tests: Vec::new() });
        files.insert("tests/factories.py".to_string(), File { text: factories_py(d), tests: Vec::new() });
        let day0 = super::build::days_from_civil(2024, 1 + rng.range(0, 10) as u32, 1 + rng.range(0, 27) as u32);
        let (commits, suspect) = git_history(rng, d.pkg, &modules, bugs.first());
        World { pkg: d.pkg, desc: d.desc, api_fn: d.api_fn, files, bugs, max_ref, commits, suspect, day0 }
    }

    fn read(&self, path: &str) -> Option<String> {
        self.files.get(path).map(|f| cat_n(&f.text))
    }

    /// Line number (1-based) of the first line equal to `needle` in `path`.
    fn line_of(&self, path: &str, needle: &str) -> usize {
        self.files.get(path).and_then(|f| f.text.lines().position(|l| l == needle)).map_or(1, |i| i + 1)
    }

    fn edit(&mut self, path: &str, old: &str, new: &str) -> bool {
        match self.files.get_mut(path) {
            Some(f) if f.text.contains(old) => {
                f.text = f.text.replacen(old, new, 1);
                true
            }
            _ => false,
        }
    }

    fn append_test(&mut self, path: &str, src: &str, name: &str) {
        if let Some(f) = self.files.get_mut(path) {
            f.text.push_str("\n\n");
            f.text.push_str(src);
            f.text.push('\n');
            f.tests.push(name.to_string());
        }
    }
}

fn models_py(rng: &mut Rng, d: &Domain) -> String {
    let mut s = format!(
        "\"\"\"SQLAlchemy models and pydantic payloads for {}.\"\"\"\n\nfrom __future__ import annotations\n\nfrom datetime import datetime\n\nfrom pydantic import BaseModel, Field\nfrom sqlalchemy import BigInteger, DateTime, Integer, String\nfrom sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column\n\nfrom {}.events import utcnow\nfrom {}.ids import new_id\n\n\nclass Base(DeclarativeBase):\n    pass\n",
        d.pkg, d.pkg, d.pkg
    );
    for (m, noun) in d.modules {
        let c = camel(noun);
        let len = 16 * rng.range(2, 8);
        s.push_str(&format!(
            "\n\nclass {c}(Base):\n    __tablename__ = \"{m}\"\n\n    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)\n"
        ));
        for f in FIELDS {
            let width = 8 * rng.range(2, 8);
            s.push_str(&format!(
                "    {f}: Mapped[str | None] = mapped_column(String({width}), index={})\n",
                if rng.chance(30) { "True" } else { "False" }
            ));
        }
        s.push_str(&format!(
            "    display_name: Mapped[str | None] = mapped_column(String({len}))\n    total_minor: Mapped[int] = mapped_column(BigInteger, default=0)\n    currency: Mapped[str] = mapped_column(String(3), default=\"EUR\")\n    version: Mapped[int] = mapped_column(Integer, default=1)\n    created_by: Mapped[str] = mapped_column(String(64))\n    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)\n    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)\n    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))\n\n    def __repr__(self) -> str:\n        return f\"{c}(id={{self.id!r}})\"\n\n\nclass {c}Create(BaseModel):\n"
        ));
        for f in FIELDS {
            s.push_str(&format!("    {f}: str | None = None\n"));
        }
        s.push_str(&format!("    display_name: str | None = Field(default=None, max_length={len})\n    total_minor: int = 0\n    currency: str = \"EUR\"\n"));
    }
    s
}

fn factories_py(d: &Domain) -> String {
    let mut s = format!(
        "\"\"\"Test factories: build model objects with sensible defaults.\"\"\"\n\nimport itertools\nimport json\nfrom datetime import datetime, timedelta, timezone\nfrom pathlib import Path\n\nfrom {pkg}.models import *  # noqa: F403\n\nFIXTURES = Path(__file__).parent / \"fixtures\"\n_seq = itertools.count(1)\nNOW = datetime(2024, 5, 14, 9, 0, tzinfo=timezone.utc)\n\n\ndef load_fixture(name: str) -> dict:\n    return json.loads((FIXTURES / name).read_text())\n",
        pkg = d.pkg
    );
    for (_, noun) in d.modules {
        let c = camel(noun);
        s.push_str(&format!(
            "\n\ndef make_{noun}(**overrides) -> {c}:\n    n = next(_seq)\n    fields = dict(\n        id=f\"{noun}_{{n:04d}}\",\n        status=\"active\",\n        reference=f\"REF-{{n:06d}}\",\n        display_name=f\"{c} {{n}}\",\n        total_minor=1000 * n,\n        currency=\"EUR\",\n        version=1,\n        created_by=\"factory\",\n        created_at=NOW,\n        updated_at=NOW,\n    )\n    fields.update(overrides)\n    return {c}(**fields)\n\n\ndef make_{noun}s(session, *, count: int, updated_days_ago: int = 0) -> list[{c}]:\n    items = [make_{noun}(updated_at=NOW - timedelta(days=updated_days_ago)) for _ in range(count)]\n    session.add_all(items)\n    session.flush()\n    return items\n"
        ));
    }
    s
}

/// `cat -n` numbering, as the read tool shows files.
fn cat_n(text: &str) -> String {
    text.lines().enumerate().map(|(i, l)| format!("{:>6}\t{l}", i + 1)).collect::<Vec<_>>().join("\n")
}

/// A module: `header`, then filler functions about `nouns` with the `planted` ones among them.
fn python_module(rng: &mut Rng, header: String, nouns: &[String], planted: &[&Bug]) -> String {
    let mut blocks: Vec<String> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let n = rng.between(16, 26);
    let mut tries = 0;
    while blocks.len() < n && tries < 60 {
        tries += 1;
        let noun = rng.pick(nouns).clone();
        let field = *rng.pick(FIELDS);
        let t = *rng.pick(&FILLERS);
        let n_cls = camel(&noun);
        let text = fill(t, &[("noun", &noun), ("N", &n_cls), ("field", field)]);
        let head =
            text.lines().find(|l| l.starts_with("def ") || l.starts_with("class ") || l.starts_with("async def "));
        let key = head.unwrap_or("").split('(').next().unwrap_or("").to_string();
        if seen.insert(key) {
            blocks.push(text);
        }
    }
    for b in planted {
        let at = rng.between(blocks.len() / 3, blocks.len());
        blocks.insert(at, b.func_src.clone());
    }
    let mut text = header;
    for b in &blocks {
        text.push_str("\n\n");
        text.push_str(b);
        text.push('\n');
    }
    text
}

fn test_module(rng: &mut Rng, pkg: &str, module: &str, noun: &str, planted: &[&Bug]) -> (String, Vec<String>) {
    let n_cls = camel(noun);
    let mut text = format!(
        "\"\"\"Tests for {pkg}.{module}.\"\"\"\n\nfrom datetime import timedelta\nfrom decimal import Decimal\n\nimport pytest\n\nfrom {pkg}.{module} import *  # noqa: F403\nfrom tests.factories import load_fixture, make_{noun}, make_{noun}s\n\npytestmark = pytest.mark.usefixtures(\"isolated_settings\")\n"
    );
    let mut blocks: Vec<String> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let n = rng.between(7, 14);
    let mut tries = 0;
    while blocks.len() < n && tries < 60 {
        tries += 1;
        let field = *rng.pick(FIELDS);
        let t = fill(rng.pick_str(&TEST_FILLERS), &[("noun", noun), ("N", &n_cls), ("field", field)]);
        let name = test_name(&t);
        if seen.insert(name) {
            blocks.push(t);
        }
    }
    for b in planted {
        let at = rng.between(0, blocks.len());
        blocks.insert(at, b.test_src.clone());
    }
    let names = blocks.iter().map(|b| test_name(b)).collect();
    for b in &blocks {
        text.push_str("\n\n");
        text.push_str(b);
        text.push('\n');
    }
    (text, names)
}

fn test_name(src: &str) -> String {
    src.lines()
        .find_map(|l| l.strip_prefix("def ").or_else(|| l.strip_prefix("async def ")))
        .and_then(|l| l.split('(').next())
        .unwrap_or("test_unknown")
        .to_string()
}

const COMMIT_VERBS: &[&str] = &[
    "fix(%m%): handle empty %noun% lists in the exporter",
    "feat(%m%): add %noun% archiving job",
    "refactor(%m%): move %noun% serialization next to the model",
    "chore(deps): bump sqlalchemy to 2.0.29",
    "test(%m%): cover %noun% merge with unknown keys",
    "perf(%m%): batch %noun% lookups in list endpoint",
    "docs: describe %noun% lifecycle in ARCHITECTURE.md",
    "ci: cache pip downloads between jobs",
    "feat(%m%): emit %noun%.updated events",
    "fix(%m%): log %noun% id on validation failure",
    "chore: ruff 0.4 autofixes",
    "build: pin python to 3.11.8 in Dockerfile",
];

fn git_history(
    rng: &mut Rng,
    _pkg: &str,
    modules: &[(&'static str, &'static str)],
    first: Option<&Bug>,
) -> (Vec<(String, String)>, usize) {
    let n = 18;
    let suspect = rng.between(3, 9);
    let mut out = Vec::with_capacity(n);
    let mut verbs: Vec<&str> = Vec::new();
    while verbs.len() < n {
        verbs.extend(rng.sample(COMMIT_VERBS, COMMIT_VERBS.len()));
    }
    for i in 0..n {
        let hash = rng.hex(7);
        let msg = if i == suspect {
            match first {
                Some(b) => format!("refactor({}): simplify {} (review feedback)", b.module, b.func),
                None => "refactor: simplify helpers".to_string(),
            }
        } else {
            let (m, noun) = *rng.pick(modules);
            let verb = verbs.pop().unwrap_or(COMMIT_VERBS[0]);
            fill(verb, &[("m", m), ("noun", noun)])
        };
        out.push((hash, msg));
    }
    (out, suspect)
}

/// A pytest run over `files` (test file paths); tests named in `failing` fail with their
/// tracebacks.
fn pytest_output(rng: &mut Rng, w: &World, files: &[String], failing: &[&Bug], verbose: bool) -> (String, bool) {
    let mut out = format!(
        "============================= test session starts ==============================\nplatform linux -- Python 3.11.8, pytest-8.1.1, pluggy-1.4.0{}\nrootdir: /workspace/{}\nconfigfile: pyproject.toml\nplugins: asyncio-0.23.6, cov-5.0.0, xdist-3.5.0\nasyncio: mode=strict\n",
        if verbose { " -- /workspace/.venv/bin/python" } else { "" },
        w.pkg
    );
    let total: usize = files.iter().map(|f| w.files.get(f).map_or(0, |x| x.tests.len())).sum();
    out.push_str(&format!("collected {total} items\n\n"));
    let mut done = 0usize;
    let mut failed = 0usize;
    for f in files {
        let Some(file) = w.files.get(f) else { continue };
        if verbose {
            for t in &file.tests {
                done += 1;
                let fails = failing.iter().any(|b| &b.test == t && &b.test_path == f);
                failed += usize::from(fails);
                let pct = done * 100 / total.max(1);
                let left = format!("{f}::{t} {}", if fails { "FAILED" } else { "PASSED" });
                out.push_str(&format!("{left:<72} [{pct:>3}%]\n"));
            }
        } else {
            let mut dots = String::new();
            for t in &file.tests {
                let fails = failing.iter().any(|b| &b.test == t && &b.test_path == f);
                failed += usize::from(fails);
                dots.push(if fails { 'F' } else { '.' });
            }
            done += file.tests.len();
            let pct = done * 100 / total.max(1);
            let left = format!("{f} {dots}");
            out.push_str(&format!("{left:<72} [{pct:>3}%]\n"));
        }
    }
    let secs = rng.range(80, 900);
    if failed > 0 {
        out.push_str("\n=================================== FAILURES ===================================\n");
        for b in failing {
            if !files.contains(&b.test_path) {
                continue;
            }
            out.push_str(&traceback(w, b));
        }
        out.push_str("=========================== short test summary info ============================\n");
        for b in failing {
            if files.contains(&b.test_path) {
                out.push_str(&format!("FAILED {}::{} - {}\n", b.test_path, b.test, b.error));
            }
        }
        out.push_str(&format!(
            "========================= {failed} failed, {} passed in {}s =========================\n",
            total - failed,
            super::build::decimal(secs as i64, 2)
        ));
    } else {
        out.push_str(&format!(
            "\n============================== {total} passed in {}s ==============================\n",
            super::build::decimal(secs as i64, 2)
        ));
    }
    (out, failed > 0)
}

fn traceback(w: &World, b: &Bug) -> String {
    let bar = format!("{:_^80}", format!(" {} ", b.test));
    let mut out = format!("{bar}\n\n");
    let test_lines: Vec<&str> = b.test_src.lines().collect();
    let fixture = if b.test_src.contains("frozen_clock") {
        "frozen_clock = <FrozenClock 2024-05-14T09:00:00+00:00>\n\n"
    } else {
        ""
    };
    out.push_str(fixture);
    let e_block = |out: &mut String| {
        for e in &b.e_lines {
            out.push_str(&format!("E       {e}\n"));
        }
    };
    for (i, l) in test_lines.iter().enumerate().take(b.test_at + 1) {
        let mark = if i == b.test_at { ">" } else { " " };
        out.push_str(&format!("{mark}   {l}\n"));
    }
    let test_line_no = w.line_of(&b.test_path, test_lines.get(b.test_at).copied().unwrap_or(""));
    match b.exc {
        None => {
            e_block(&mut out);
            out.push_str(&format!("\n{}:{test_line_no}: AssertionError\n", b.test_path));
        }
        Some(exc) => {
            out.push_str(&format!("\n{}:{test_line_no}: \n", b.test_path));
            out.push_str(&format!("{}\n\n", "_ ".repeat(40).trim_end()));
            let f_lines: Vec<&str> = b.func_src.lines().collect();
            for (i, l) in f_lines.iter().enumerate().take(b.raise_at + 1) {
                let mark = if i == b.raise_at { ">" } else { " " };
                out.push_str(&format!("{mark}   {l}\n"));
            }
            e_block(&mut out);
            let line_no = w.line_of(&b.path, f_lines.get(b.raise_at).copied().unwrap_or(""));
            out.push_str(&format!("\n{}:{line_no}: {exc}\n", b.path));
        }
    }
    out
}

fn rg_output(rng: &mut Rng, w: &World, b: &Bug) -> String {
    let mut lines = Vec::new();
    let def_line = w.line_of(&b.path, b.func_src.lines().next().unwrap_or(""));
    lines.push(format!("{}:{def_line}:{}", b.path, b.func_src.lines().next().unwrap_or("")));
    let callers = rng.between(2, 6);
    for _ in 0..callers {
        let (m, _) = *rng.pick(DOMAINS.iter().find(|d| d.pkg == w.pkg).map_or(DOMAINS[0].modules, |d| d.modules));
        let ln = rng.range(20, 400);
        let call = match b.kind {
            Kind::MissingKey => format!("        obj = {}(payload)", b.func),
            Kind::Rounding => format!("    amount_minor = {}(original.amount, ratio)", b.func),
            Kind::NoneAttr => format!("        \"name\": {}(record),", b.func),
            Kind::DecimalFloat => format!("    total = {}(subtotal, fee)", b.func),
            Kind::Pagination => format!("    page = {}(rows, offset=offset, limit=limit)", b.func),
            Kind::NaiveDatetime => format!("    for item in {}(items, days=settings.stale_after_days):", b.func),
            Kind::ZeroDivision => format!("        \"progress\": {}(stats.done, stats.total),", b.func),
            Kind::IntParse => format!("            qty = {}(row[\"quantity\"])", b.func),
        };
        lines.push(format!("src/{}/{m}.py:{ln}:{call}", w.pkg));
    }
    let test_line = w.line_of(&b.test_path, b.test_src.lines().nth(b.test_at).unwrap_or(""));
    lines.push(format!("{}:{test_line}:{}", b.test_path, b.test_src.lines().nth(b.test_at).unwrap_or("")));
    let key = |l: &String| {
        let mut parts = l.splitn(3, ':');
        let file = parts.next().unwrap_or("").to_string();
        let n: u64 = parts.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        (file, n)
    };
    lines.sort_by_key(key);
    lines.dedup();
    lines.join("\n")
}

fn diff_output(rng: &mut Rng, b: &Bug, line: usize) -> String {
    format!(
        "diff --git a/{p} b/{p}\nindex {}..{} 100644\n--- a/{p}\n+++ b/{p}\n@@ -{line},1 +{line},1 @@\n-{}\n+{}\n",
        rng.hex(7),
        rng.hex(7),
        b.buggy,
        b.fixed,
        p = b.path
    )
}

fn system_prompt(w: &World, date: &str) -> String {
    fill_text(include_str!("texts/coding_system.md"), &[("pkg", w.pkg), ("desc", w.desc), ("date", date)])
}

const OPENERS: &[&str] = &[
    "CI on main has been red since this morning.",
    "The nightly build failed again.",
    "We have a failing test blocking the release.",
    "Something broke in last night's merge train.",
];

const PRAISE: &[&str] =
    &["Nice, thanks.", "Good catch.", "Great, that makes sense.", "Perfect.", "Thanks, looks right."];

pub(super) fn generate(spec: Spec) -> Conversation {
    let Spec { mut rng, target, mut finish } = spec;
    // About 14k tokens per bug; plan generously, the loop stops at the target.
    let n_bugs = (target / 9_000) as usize + 3;
    let mut w = World::new(&mut rng, n_bugs);
    let mut b = Builder::new(rng.fork(), IdStyle::Anthropic);
    let today = super::build::date(w.day0);
    b.system(system_prompt(&w, &today));

    let first = w.bugs[0].clone();
    let task = format!(
        "{} `{}::{}` fails with `{}`. Please find the root cause and fix it. Constraints: don't change the public signature of `{}()`, and don't touch anything under `migrations/`. Add a regression test for whatever you fix, and run the whole suite before you tell me it's done.",
        rng.pick(OPENERS),
        first.test_path,
        first.test,
        first.error,
        w.api_fn
    );
    let task_idx = b.user(task);
    let full_test = format!("{}::{}", first.test_path, first.test);
    b.probe(
        ProbeKind::Task,
        "fix-failing-test",
        q(
            "What did the user originally ask the agent to do?",
            format!("Find the root cause of the failing test {full_test} ({}) and fix it, with a regression test and a full suite run.", first.error),
            &[&[&full_test, &first.test], &[&first.error]],
        ),
        task_idx,
    );
    b.probe(
        ProbeKind::Decision,
        "constraints",
        q(
            "Which directory did the user forbid the agent to change, and which function's signature must stay the same?",
            format!("Nothing under migrations/ may be touched, and the public signature of {}() must not change.", w.api_fn),
            &[&["migrations/"], &[w.api_fn]],
        ),
        task_idx,
    );

    // Orientation: status, history, layout in parallel.
    let log: String = w.commits.iter().map(|(h, m)| format!("{h} {m}")).collect::<Vec<_>>().join("\n");
    let mut listing: Vec<String> = w.files.keys().cloned().collect();
    listing.extend(
        ["pyproject.toml", "README.md", "migrations/env.py", "tests/factories.py", "tests/conftest.py"]
            .map(String::from),
    );
    listing.sort();
    listing.dedup();
    let round = b.tools(
        "I'll start by getting oriented: working tree state, recent history and the layout of the package.",
        vec![
            Call::ok(
                "bash",
                J::Obj(vec![("command".into(), J::Str("git status --short && git log --oneline -n 18".into()))])
                    .compact(),
                log.clone(),
            ),
            Call::ok(
                "bash",
                J::Obj(vec![(
                    "command".into(),
                    J::Str("git ls-files 'src/*.py' 'tests/*.py' pyproject.toml migrations".into()),
                )])
                .compact(),
                listing.join("\n"),
            ),
        ],
    );
    let (suspect_hash, suspect_msg) = w.commits[w.suspect].clone();
    b.probe(
        ProbeKind::Recall,
        "suspect-commit",
        q(
            format!("Which commit in the first git log touched {} just before the failure appeared?", first.func),
            format!("Commit {suspect_hash}: {suspect_msg}."),
            &[&[&suspect_hash]],
        ),
        round.results[0],
    );

    let mut bug_i = 0usize;
    let mut asked_const = false;
    while bug_i < w.bugs.len() {
        let bug = w.bugs[bug_i].clone();
        episode(&mut rng, &mut b, &mut w, &bug, bug_i, &mut asked_const);
        bug_i += 1;
        let more = b.tokens() + 4_000 < target && bug_i < w.bugs.len();
        // Full suite: shows the next failure when there is one.
        let files: Vec<String> = w.files.keys().filter(|p| p.starts_with("tests/")).cloned().collect();
        let failing: Vec<&Bug> = if more { vec![&w.bugs[bug_i]] } else { Vec::new() };
        let verbose = rng.chance(35);
        let (out, failed) = pytest_output(&mut rng, &w, &files, &failing, verbose);
        let cmd = if verbose { "python -m pytest -v" } else { "python -m pytest -q -p no:cacheprovider" };
        let text = "The targeted tests pass. Running the whole suite to make sure nothing else regressed.";
        let call = if failed {
            Call::err(
                "bash",
                J::Obj(vec![("command".into(), J::Str(cmd.into()))]).compact(),
                format!("Exit code 1\n{out}"),
            )
        } else {
            Call::ok("bash", J::Obj(vec![("command".into(), J::Str(cmd.into()))]).compact(), out)
        };
        b.tool(text, call);
        if !more {
            break;
        }
        let next = &w.bugs[bug_i];
        if rng.chance(50) {
            b.assistant(format!(
                "The fix for `{}` holds, but the full run has one more failure: `{}::{}` with `{}`. It's in `{}`, unrelated to the change I just made. I'll look into it next unless you want me to stop here.",
                bug.func, next.test_path, next.test, next.error, next.path
            ));
            b.user(format!("{} Yes, go ahead with that one too, same constraints.", rng.pick(PRAISE)));
        } else {
            b.assistant(format!(
                "Done with `{}`: the regression test passes and so does the rest of its module. The full suite still shows `{}` failing in `{}`.",
                bug.func, next.test, next.test_path
            ));
            b.user(format!(
                "{} That `{}` failure is the other thing on my list, please take it. Keep the fix inside `{}` if you can.",
                rng.pick(PRAISE),
                next.test,
                next.path
            ));
        }
    }

    // Wrap up: the release steps come last.
    let version = format!("{}.{}.{}", rng.range(1, 4), rng.range(0, 12), rng.range(1, 9));
    let base = format!("release/{}", &version[..version.rfind('.').unwrap_or(version.len())]);
    let branch =
        format!("fix/{}-{}", w.bugs[0].module, rng.pick(&["regressions", "nightly-failures", "ci-red", "test-fixes"]));
    let fixed_list: Vec<String> = w.bugs.iter().take(bug_i).map(|x| format!("`{}`", x.func)).collect();
    b.assistant(format!(
        "All green: the full suite passes. Summary of the changes:\n{}\nEach fix has a regression test next to the test that caught it. Nothing under migrations/ changed and `{}()` keeps its signature.",
        w.bugs.iter().take(bug_i).map(|x| format!("- {}: {} (fixed `{}`)", x.path, x.error, x.func)).collect::<Vec<_>>().join("\n"),
        w.api_fn
    ));
    let ask = b.user(format!(
        "Great work. Next: bump the version in pyproject.toml to {version}, add a `### Fixed` entry to CHANGELOG.md listing {}, then commit on a branch `{branch}` and open a PR against `{base}`. Don't merge it, Priya wants to review first.",
        fixed_list.join(", ")
    ));
    b.probe(
        ProbeKind::Continuation,
        "release-steps",
        q(
            "What is the agent supposed to do next?",
            format!("Bump the version to {version} in pyproject.toml, add a ### Fixed entry to CHANGELOG.md, commit on {branch} and open a PR against {base} without merging."),
            &[&[&version], &["CHANGELOG.md"], &[&branch], &[&base]],
        ),
        ask,
    );
    let old = format!("{}.{}.0", &version[..1], rng.range(0, 9));
    let pyproject = format!(
        "[project]\nname = \"{pkg}\"\nversion = \"{old}\"\ndescription = \"{desc}\"\nrequires-python = \">=3.11\"\ndependencies = [\n    \"sqlalchemy>=2.0.29\",\n    \"pydantic>=2.6\",\n    \"httpx>=0.27\",\n]\n\n[project.optional-dependencies]\ndev = [\"pytest>=8.1\", \"pytest-asyncio>=0.23\", \"pytest-cov>=5\", \"ruff>=0.4\", \"mypy>=1.9\"]\n\n[tool.pytest.ini_options]\nasyncio_mode = \"strict\"\naddopts = \"-ra\"\n\n[tool.ruff]\nline-length = 100\n",
        pkg = w.pkg,
        desc = w.desc
    );
    let r = b.tools(
        format!("On it. I'll bump ./pyproject.toml to {version} first, then write the CHANGELOG entry and create `{branch}`."),
        vec![
            Call::ok("read_file", J::Obj(vec![("path".into(), J::Str("pyproject.toml".into()))]).compact(), cat_n(&pyproject)),
            Call::err(
                "read_file",
                J::Obj(vec![("path".into(), J::Str("CHANGELOG.md".into()))]).compact(),
                "Error: File does not exist: CHANGELOG.md. Current directory: /workspace/".to_string() + w.pkg,
            ),
        ],
    );
    b.probe(
        ProbeKind::Continuation,
        "next-file",
        q(
            "Which file is the agent about to edit first, and to what version?",
            format!("./pyproject.toml, to version {version}."),
            &[&["./pyproject.toml", "pyproject.toml"], &[&version]],
        ),
        r.call,
    );
    finish.scenario = format!("{}: {} bugs fixed, from {}", w.pkg, bug_i, w.bugs[0].func);
    b.finish(finish)
}

/// One bug from reproduction to a passing regression test.
fn episode(rng: &mut Rng, b: &mut Builder, w: &mut World, bug: &Bug, i: usize, asked_const: &mut bool) {
    // Read test and module (and sometimes a wrong path) in parallel.
    let mut calls = vec![
        Call::ok("read_file", path_args(&bug.test_path), w.read(&bug.test_path).unwrap_or_default()),
        Call::ok("read_file", path_args(&bug.path), w.read(&bug.path).unwrap_or_default()),
    ];
    let wrong = match rng.below(3) {
        0 => format!("src/{}/utils/{}.py", w.pkg, bug.module),
        1 => format!("src/{}/core/{}.py", w.pkg, bug.module),
        _ => format!("src/{}/{}/__init__.py", w.pkg, bug.module),
    };
    if i == 0 {
        let models = format!("src/{}/models.py", w.pkg);
        calls.push(Call::ok("read_file", path_args(&models), w.read(&models).unwrap_or_default()));
    } else if rng.chance(30) {
        calls.push(Call::ok(
            "read_file",
            path_args("tests/factories.py"),
            w.read("tests/factories.py").unwrap_or_default(),
        ));
    }
    let miss = rng.chance(40);
    if miss {
        calls.push(Call::err("read_file", path_args(&wrong), format!("Error: File does not exist: {wrong}")));
    }
    let round = b.tools(format!("Let me read the failing test and ./{} side by side.", bug.path), calls);
    if !*asked_const {
        *asked_const = true;
        let mr = w.max_ref.get(&bug.path).copied().unwrap_or(64);
        let line = format!("MAX_REFERENCE_LEN = {mr}");
        b.probe(
            ProbeKind::Recall,
            "max-reference-len",
            q(format!("What is MAX_REFERENCE_LEN set to in {}?", bug.path), format!("{mr}"), &[&[&line]]),
            round.results[1],
        );
    }
    if miss {
        b.assistant(format!(
            "{wrong} doesn't exist; `{}` lives directly in ./{}. Now let me reproduce the failure.",
            bug.func, bug.path
        ));
    }
    // Reproduce.
    let (out, _) = pytest_output(rng, w, std::slice::from_ref(&bug.test_path), &[bug], false);
    let cmd = format!("python -m pytest {} -x -q", bug.test_path);
    let rep = b.tool(
        format!("Reproducing with only {} first.", bug.test_path),
        Call::err("bash", J::Obj(vec![("command".into(), J::Str(cmd))]).compact(), format!("Exit code 1\n{out}")),
    );
    let error_probe = (i == 0 || (rng.chance(55) && b.count_probes(ProbeKind::Recall) < 12)).then(|| {
        b.probe(
            ProbeKind::Recall,
            &format!("error-{}", bug.module),
            q(
                format!("What error did {} fail with when the agent reproduced it?", bug.test),
                bug.error.clone(),
                &[&[&bug.error]],
            ),
            rep.results[0],
        )
    });
    // Some are asked while the fix is being made, when the agent still needs the error.
    let ask_mid = error_probe.filter(|_| rng.chance(35));
    // Callers.
    let rg = rg_output(rng, w, bug);
    b.tool(
        format!("Reproduced. Before changing `{}`, let me see who calls it.", bug.func),
        Call::ok(
            "bash",
            J::Obj(vec![("command".into(), J::Str(format!("rg -n \"{}\" src tests", bug.func)))]).compact(),
            rg,
        ),
    );
    let line = w.line_of(&bug.path, &bug.buggy);
    // Options and the user's choice (about half the time).
    let ask = i == 0 || rng.chance(45);
    let probe_decision = b.count_probes(ProbeKind::Decision) < 10;
    if ask {
        let (chosen, rejected, cf, rf) = &bug.choice;
        let (a, c) = if rng.chance(50) { (chosen, rejected) } else { (rejected, chosen) };
        b.assistant(format!(
            "Root cause: line {line} of {} reads\n\n```python\n{}\n```\n\nwhich is what `{}` trips over ({}). Two ways to fix it:\n1. {a}\n2. {c}\nWhich do you prefer?",
            bug.path,
            bug.buggy.trim(),
            bug.test,
            bug.error,
        ));
        let u = b.user(format!(
            "Let's do it this way: {chosen}. Not {rejected}; we talked about that in the design review and it's out of scope for a fix."
        ));
        if probe_decision {
            b.probe(
                ProbeKind::Decision,
                &format!("fix-{}", bug.module),
                q(
                    format!("How did the user want the {} failure fixed, and what did they reject?", bug.func),
                    format!("Chosen: {chosen}. Rejected: {rejected}."),
                    &[&[cf], &[rf]],
                ),
                u,
            );
        }
    } else {
        b.assistant(format!(
            "Root cause is line {line} of {}: `{}`. The fix is local to `{}`; callers don't need to change.",
            bug.path,
            bug.buggy.trim(),
            bug.func
        ));
    }
    // Edit, sometimes with a first miss.
    let dot = format!("./{}", bug.path);
    if rng.chance(30) {
        let sloppy = bug.buggy.trim().to_string();
        b.tool(
            format!("Editing {dot}."),
            Call::err(
                "edit_file",
                edit_args(&bug.path, &format!("{sloppy}\n    return"), &bug.fixed),
                format!("Error: String to replace not found in file.\nString: {sloppy}\n    return"),
            ),
        );
    }
    let applied = w.edit(&bug.path, &bug.buggy, &bug.fixed);
    let snippet = {
        let text = w.files.get(&bug.path).map(|f| f.text.clone()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let lo = line.saturating_sub(4);
        let hi = (line + 3).min(lines.len());
        lines[lo..hi].iter().enumerate().map(|(k, l)| format!("{:>6}\t{l}", lo + k + 1)).collect::<Vec<_>>().join("\n")
    };
    let result = if applied {
        format!("The file {} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{snippet}", bug.path)
    } else {
        format!("The file {} has been updated.", bug.path)
    };
    let e = b.tool(
        format!("Fixing `{}` in {dot}: replacing the line that fails.", bug.func),
        Call::ok("edit_file", edit_args(&bug.path, &bug.buggy, &bug.fixed), result),
    );
    if let Some(id) = ask_mid {
        b.ask_probe_at(&id, e.call);
    }
    if b.count_probes(ProbeKind::Artifact) < 12 {
        b.probe(
            ProbeKind::Artifact,
            &format!("edited-{}", bug.module),
            q(
                format!("Which file did the agent edit to fix {}, and which function?", bug.test),
                format!("{} (function {}).", bug.path, bug.func),
                &[&[&dot, &bug.path], &[&bug.func]],
            ),
            e.call,
        );
    }
    // Regression test.
    let reg_name = test_name(&bug.regression);
    let test_text = w.files.get(&bug.test_path).map(|f| f.text.clone()).unwrap_or_default();
    let last_block = test_text.trim_end().rsplit("\n\n\n").next().unwrap_or("").to_string();
    w.append_test(&bug.test_path, &bug.regression, &reg_name);
    b.tool(
        format!("Adding the regression test `{reg_name}` to ./{}.", bug.test_path),
        Call::ok(
            "edit_file",
            edit_args(&bug.test_path, &last_block, &format!("{last_block}\n\n\n{}", bug.regression)),
            format!("The file {} has been updated.", bug.test_path),
        ),
    );
    // Rerun module tests, lint, diff.
    let (out, _) = pytest_output(rng, w, std::slice::from_ref(&bug.test_path), &[], true);
    let diff = diff_output(rng, bug, line);
    b.tools(
        "Rerunning the module's tests, plus ruff and the diff.",
        vec![
            Call::ok(
                "bash",
                J::Obj(vec![("command".into(), J::Str(format!("python -m pytest {} -v", bug.test_path)))]).compact(),
                out,
            ),
            Call::ok(
                "bash",
                J::Obj(vec![(
                    "command".into(),
                    J::Str(format!("ruff check {} {} && git diff -- {}", bug.path, bug.test_path, bug.path)),
                )])
                .compact(),
                format!("All checks passed!\n{diff}"),
            ),
        ],
    );
}

fn path_args(path: &str) -> String {
    J::Obj(vec![("path".into(), J::Str(path.into()))]).compact()
}

fn edit_args(path: &str, old: &str, new: &str) -> String {
    J::Obj(vec![
        ("path".into(), J::Str(path.into())),
        ("old_string".into(), J::Str(old.into())),
        ("new_string".into(), J::Str(new.into())),
    ])
    .compact()
}
