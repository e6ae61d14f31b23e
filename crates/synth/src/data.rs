//! `data`: a data analyst chasing a metric drop through the warehouse, logs and CSV exports.
//!
//! Tool outputs are huge, as in real analysis sessions: `run_sql` returns psql-style tables
//! of hundreds of rows, `bash` tails service logs and dumps CSV exports of tens of KB, and
//! `python` prints data frames. A query fails on a wrong column name; the user adds
//! constraints as the analysis goes; the agent writes result files and a chart; the session
//! ends with the follow-up work.
//!
//! Planted facts: the metric, its drop and the week (message 1), the table the user ruled out
//! and the accounts to exclude (message 1), a row count from the catalog, the failing query's
//! error, the first occurrence of the error code in the logs, the release that introduced it,
//! each file written (with and without `./`), later constraints from the user, and the
//! follow-up steps at the end.

use compaction::{Conversation, ProbeKind};

use super::build::{decimal, fill_text, grouped, q, s, Builder, Call, IdStyle, J};
use super::rng::Rng;
use super::Spec;

struct Company {
    name: &'static str,
    slug: &'static str,
    product: &'static str,
    metric: &'static str,
    metric_col: &'static str,
    service: &'static str,
    code: &'static str,
    message: &'static str,
}

const COMPANIES: &[Company] = &[
    Company {
        name: "Lumen",
        slug: "lumen",
        product: "photo-sharing app",
        metric: "weekly active users",
        metric_col: "wau",
        service: "auth-gateway",
        code: "E_TOKEN_EXPIRED",
        message: "refresh token expired before rotation",
    },
    Company {
        name: "Cartwheel",
        slug: "cartwheel",
        product: "online grocery marketplace",
        metric: "weekly active buyers",
        metric_col: "buyers",
        service: "payments-api",
        code: "E_3DS_TIMEOUT",
        message: "3-D Secure challenge timed out",
    },
    Company {
        name: "Tallyho",
        slug: "tallyho",
        product: "team expense app",
        metric: "weekly active teams",
        metric_col: "active_teams",
        service: "sync-worker",
        code: "E_SCHEMA_MISMATCH",
        message: "client payload schema v7 rejected by server v6",
    },
    Company {
        name: "Orbit Fitness",
        slug: "orbitfit",
        product: "workout tracking app",
        metric: "weekly active users",
        metric_col: "wau",
        service: "notify-svc",
        code: "E_PUSH_QUOTA",
        message: "push provider quota exceeded",
    },
];

const REGIONS: &[&str] = &["EU", "NA", "LATAM", "APAC", "MEA", "UK"];
const PLATFORMS: &[&str] = &["android", "ios", "web"];

struct World {
    c: &'static Company,
    region: &'static str,
    platform: &'static str,
    year: i64,
    week: i64,
    drop_pct: u64,
    release: String,
    deploy_secs: i64,
    first_error_secs: i64,
    events_rows: u64,
    internal_domain: String,
}

impl World {
    /// Monday of ISO week `week` (2024 starts on a Monday).
    fn week_start(&self, week: i64) -> i64 {
        super::build::days_from_civil(self.year, 1, 1) + 7 * (week - 1)
    }
    fn week_label(&self, week: i64) -> String {
        format!("{}-W{:02}", self.year, week)
    }
}

/// A psql-style table.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!(" {:<w$} ", c, w = widths[i]))
            .collect::<Vec<_>>()
            .join("|")
            .trim_end()
            .to_string()
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    out.push('\n');
    out.push_str(&widths.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+"));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    out.push_str(&format!("({} rows)\n", rows.len()));
    out
}

fn sql(query: &str) -> String {
    J::Obj(vec![("query".into(), s(query))]).compact()
}

fn cmd(command: &str) -> String {
    J::Obj(vec![("command".into(), s(command))]).compact()
}

fn code(src: &str) -> String {
    J::Obj(vec![("code".into(), s(src))]).compact()
}

fn system_prompt(w: &World) -> String {
    fill_text(include_str!("texts/data_system.md"), &[("name", w.c.name), ("product", w.c.product)])
}

pub(super) fn generate(spec: Spec) -> Conversation {
    let Spec { mut rng, target, mut finish } = spec;
    let c = rng.pick(COMPANIES);
    let year = 2024;
    let week = rng.range(8, 40) as i64;
    let mut w = World {
        c,
        region: rng.pick_str(REGIONS),
        platform: rng.pick_str(&PLATFORMS[..2]),
        year,
        week,
        drop_pct: rng.range(9, 27),
        release: format!("{}.{}.{}", rng.range(3, 6), rng.range(0, 19), rng.range(0, 3)),
        deploy_secs: 0,
        first_error_secs: 0,
        events_rows: rng.range(800_000_000, 3_000_000_000),
        internal_domain: format!("@{}-internal.com", c.slug),
    };
    let monday = w.week_start(week);
    w.deploy_secs = (monday - 1) * 86_400 + 3600 * rng.range(18, 23) as i64 + 60 * rng.range(0, 59) as i64;
    w.first_error_secs = w.deploy_secs + 60 * rng.range(60, 300) as i64 + rng.range(0, 59) as i64;
    let mut b = Builder::new(rng.fork(), IdStyle::Anthropic);
    b.system(system_prompt(&w));

    let wl = w.week_label(week);
    let wshort = format!("W{:02}", week);
    let prev = w.week_label(week - 1);
    let drop = format!("{}%", w.drop_pct);
    let task = b.user(format!(
        "{} in {} dropped {drop} in {wl} compared with {prev}. I need to know why before Friday's growth review. Use analytics.events_v3 for everything: events_v2 is deprecated and double-counts client retries. And exclude internal accounts (emails ending in {}) as usual.",
        super::build::capitalize(c.metric),
        w.region,
        w.internal_domain
    ));
    b.probe(
        ProbeKind::Task,
        "metric-drop",
        q(
            "What is the agent investigating?",
            format!("Why {} in {} dropped {drop} in {wl} compared with {prev}.", c.metric, w.region),
            &[&[&drop], &[&wl, &wshort], &[&super::build::capitalize(c.metric)]],
        ),
        task,
    );
    b.probe(
        ProbeKind::Decision,
        "no-events-v2",
        q(
            "Which table did the user rule out, and why? Which accounts must be excluded?",
            format!(
                "analytics.events_v2, deprecated and double-counting retries; exclude internal accounts ({}).",
                w.internal_domain
            ),
            &[&["events_v2"], &[&w.internal_domain]],
        ),
        task,
    );

    // Catalog.
    let mut cat_rows = Vec::new();
    let tables = [
        ("analytics", "events_v3"),
        ("analytics", "events_v2"),
        ("analytics", "users"),
        ("analytics", "sessions"),
        ("analytics", "devices"),
        ("analytics", "experiments"),
        ("billing", "orders"),
        ("billing", "refunds"),
        ("billing", "subscriptions"),
        ("ops", "deploys"),
        ("ops", "incidents"),
        ("ops", "feature_flags"),
    ];
    for (sch, t) in tables {
        let rows = if t == "events_v3" { w.events_rows } else { rng.range(1_000, 900_000_000) };
        cat_rows.push(vec![
            sch.to_string(),
            t.to_string(),
            rows.to_string(),
            format!("{} GB", rows / 9_000_000 + 1),
            super::build::date(monday + rng.range(0, 6) as i64),
        ]);
    }
    let cat = b.tool(
        "Let me start with what's in the warehouse and how big the relevant tables are.",
        Call::ok(
            "run_sql",
            sql("select table_schema, table_name, row_estimate, total_size, last_analyzed from ops.table_catalog where table_schema in ('analytics','billing','ops') order by 1, 2;"),
            table(&["table_schema", "table_name", "row_estimate", "total_size", "last_analyzed"], &cat_rows),
        ),
    );
    let rows_s = w.events_rows.to_string();
    b.probe(
        ProbeKind::Recall,
        "events-rows",
        q(
            "How many rows does analytics.events_v3 hold according to the catalog?",
            grouped(w.events_rows),
            &[&[&rows_s]],
        ),
        cat.results[0],
    );

    // The metric by region and week, with a wrong column first.
    let bad = b.tool(
        format!("Now the weekly metric by region for the last 12 weeks, from events_v3, excluding {}.", w.internal_domain),
        Call::err(
            "run_sql",
            sql(&format!(
                "select region_code, to_char(event_ts, 'IYYY-\"W\"IW') as week, count(distinct user_id) as {}\nfrom analytics.events_v3 e join analytics.users u using (user_id)\nwhere u.email not like '%{}' and event_name in ('app_open','sync','purchase')\n  and event_ts >= date '{}'\ngroup by 1, 2 order by 1, 2;",
                c.metric_col,
                w.internal_domain,
                super::build::date(monday - 77)
            )),
            "ERROR:  column \"region_code\" does not exist\nLINE 1: select region_code, to_char(event_ts, 'IYYY-\"W\"IW') as week...\n               ^\nHINT:  Perhaps you meant to reference the column \"u.region\".".to_string(),
        ),
    );
    b.probe(
        ProbeKind::Recall,
        "sql-error",
        q(
            "What error did the first weekly query return?",
            "column \"region_code\" does not exist (the column is u.region).".to_string(),
            &[&["region_code"], &["does not exist"]],
        ),
        bad.results[0],
    );
    let mut rows = Vec::new();
    for r in REGIONS {
        let base = rng.range(40_000, 900_000) as i64;
        for k in (0..12).rev() {
            let wk = week - k;
            let mut v = base + (rng.range(0, 60) as i64 - 30) * base / 1000;
            if *r == w.region && wk == week {
                v = v * (100 - w.drop_pct as i64) / 100;
            }
            rows.push(vec![r.to_string(), w.week_label(wk), v.to_string()]);
        }
    }
    b.tool(
        "The region lives on users. Retrying with u.region.",
        Call::ok(
            "run_sql",
            sql(&format!(
                "select u.region, to_char(e.event_ts, 'IYYY-\"W\"IW') as week, count(distinct e.user_id) as {}\nfrom analytics.events_v3 e join analytics.users u using (user_id)\nwhere u.email not like '%{}' and e.event_name in ('app_open','sync','purchase')\n  and e.event_ts >= date '{}'\ngroup by 1, 2 order by 1, 2;",
                c.metric_col,
                w.internal_domain,
                super::build::date(monday - 77)
            )),
            table(&["region", "week", c.metric_col], &rows),
        ),
    );
    b.assistant(format!(
        "Confirmed: {} in {} falls {drop} in {wl}; the other regions are flat within their usual noise. Next I'll split {} by platform and app version to see whether the drop is concentrated.",
        c.metric, w.region, w.region
    ));

    // Investigation steps until the target.
    let mut step = 0usize;
    let mut files: Vec<String> = Vec::new();
    while b.tokens() + 8_000 < target {
        match step % 6 {
            0 => by_version(&mut rng, &mut b, &w, step),
            1 => logs(&mut rng, &mut b, &w, step == 1),
            2 => deploys(&mut rng, &mut b, &w, step == 2),
            3 => csv_dump(&mut rng, &mut b, &w),
            4 => pandas(&mut rng, &mut b, &w, &mut files),
            _ => interjection(&mut rng, &mut b, &w, step),
        }
        step += 1;
    }
    if files.is_empty() {
        pandas(&mut rng, &mut b, &w, &mut files);
    }

    // Findings and the follow-up.
    let first = super::build::timestamp(w.first_error_secs);
    b.assistant(format!(
        "Summary of findings:\n- {} in {} dropped {drop} in {wl}; only {} is affected, the other platforms are flat.\n- The drop starts right after release {} reached {} ({}).\n- {} logs show {} ({}) from {first} on, almost all from {}/{}.\n- Output files: {}.\nCaveat: {wl} data for the last day is still being backfilled; the final number may move by about a point.",
        super::build::capitalize(c.metric),
        w.region,
        w.platform,
        w.release,
        w.platform,
        super::build::timestamp(w.deploy_secs),
        c.service,
        c.code,
        c.message,
        w.platform,
        w.release,
        files.iter().map(|f| format!("./{f}")).collect::<Vec<_>>().join(", ")
    ));
    let next_week = w.week_label(week + 1);
    let ask = b.user(format!(
        "This is great, thanks. Next: once the {next_week} data lands tomorrow, rerun the weekly query to see whether it recovers, then post the chart and a three-line summary to #growth-analytics. Also open a ticket for the {} team referencing release {} and the {} spike.",
        c.service, w.release, c.code
    ));
    b.probe(
        ProbeKind::Continuation,
        "follow-up",
        q(
            "What is the agent supposed to do next?",
            format!("Rerun the weekly query with {next_week} data, post the chart and summary to #growth-analytics, and open a ticket for the {} team about release {}.", c.service, w.release),
            &[&[&next_week], &["#growth-analytics"], &[&w.release]],
        ),
        ask,
    );
    b.assistant(format!(
        "Will do. Tomorrow I'll rerun the weekly {} query including {next_week}, post the chart and summary to #growth-analytics, and draft the ticket for {} with the release {} evidence and the first {} at {first}.",
        c.metric_col, c.service, w.release, c.code
    ));
    finish.scenario = format!("{}: {} {} drop in {} {}, {} steps", c.name, c.metric, drop, w.region, wl, step);
    b.finish(finish)
}

fn by_version(rng: &mut Rng, b: &mut Builder, w: &World, step: usize) {
    let mut rows = Vec::new();
    let versions: Vec<String> = (0..rng.between(7, 13))
        .map(|i| {
            if i == 0 {
                w.release.clone()
            } else {
                format!("{}.{}.{}", rng.range(3, 6), rng.range(0, 19), rng.range(0, 3))
            }
        })
        .collect();
    for p in PLATFORMS {
        for v in &versions {
            let base = rng.range(2_000, 40_000) as i64;
            for d in 0..14 {
                let day = w.week_start(w.week - 1) + d;
                let mut n = base + (rng.range(0, 100) as i64 - 50) * base / 1000;
                if *p == w.platform && *v == w.release && d >= 7 {
                    n = n * (100 - 3 * w.drop_pct as i64) / 100;
                }
                rows.push(vec![p.to_string(), v.clone(), super::build::date(day), n.max(0).to_string()]);
            }
        }
    }
    let query = format!(
        "select e.platform, e.app_version, e.event_ts::date as day, count(distinct e.user_id) as users\nfrom analytics.events_v3 e join analytics.users u using (user_id)\nwhere u.region = '{}' and u.email not like '%{}'\n  and e.event_ts >= date '{}' and e.event_ts < date '{}'\ngroup by 1, 2, 3 order by 1, 2, 3;",
        w.region,
        w.internal_domain,
        super::build::date(w.week_start(w.week - 1)),
        super::build::date(w.week_start(w.week + 1))
    );
    let text = if step == 0 {
        format!(
            "Daily active users in {} by platform and app version over {} and {}.",
            w.region,
            w.week_label(w.week - 1),
            w.week_label(w.week)
        )
    } else {
        "Repeating the split on the latest backfilled data, to check the pattern holds.".to_string()
    };
    b.tool(text, Call::ok("run_sql", sql(&query), table(&["platform", "app_version", "day", "users"], &rows)));
    b.assistant(format!(
        "The daily numbers for {}/{} fall by roughly {}% from the first day of {} while other versions and platforms stay flat. That points at the {} release rather than seasonality or tracking.",
        w.platform,
        w.release,
        3 * w.drop_pct,
        w.week_label(w.week),
        w.release
    ));
}

fn log_line(rng: &mut Rng, w: &World, secs: i64, error: bool) -> String {
    let c = w.c;
    let ts = format!("{}.{:03}Z", &super::build::timestamp(secs)[..19], rng.range(0, 999));
    let req = rng.hex(12);
    let user = format!("u_{}", rng.digits(8));
    if error {
        format!(
            "{ts} ERROR {} [req={req}] user={user} code={} msg=\"{}\" app={}/{} region={} latency_ms={}",
            c.service,
            c.code,
            c.message,
            w.platform,
            w.release,
            w.region.to_lowercase(),
            rng.range(20, 900)
        )
    } else {
        let (lvl, msg) = *rng.pick(&[
            ("INFO", "request ok"),
            ("INFO", "request ok"),
            ("INFO", "cache hit"),
            ("DEBUG", "upstream latency sample"),
            ("WARN", "slow upstream response"),
            ("INFO", "token refreshed"),
        ]);
        let plat = *rng.pick(PLATFORMS);
        format!(
            "{ts} {lvl} {} [req={req}] user={user} msg=\"{msg}\" app={plat}/{}.{}.{} region={} latency_ms={}",
            c.service,
            rng.range(3, 6),
            rng.range(0, 19),
            rng.range(0, 3),
            w.region.to_lowercase(),
            rng.range(5, 400)
        )
    }
}

fn logs(rng: &mut Rng, b: &mut Builder, w: &World, probe: bool) {
    let c = w.c;
    let n = rng.between(160, 330);
    let start = w.first_error_secs - (n as i64 / 3) * 7;
    let mut lines = Vec::with_capacity(n);
    let mut t = start;
    let mut first_done = false;
    for _ in 0..n {
        t += rng.range(1, 12) as i64;
        if !first_done && t >= w.first_error_secs {
            lines.push(log_line(rng, w, w.first_error_secs, true));
            first_done = true;
            continue;
        }
        let err = first_done && rng.chance(35);
        lines.push(log_line(rng, w, t, err));
    }
    let file = format!("/var/log/{}/app.log", c.service);
    b.tool(
        format!("Let me look at the {} logs around the start of {}.", c.service, w.week_label(w.week)),
        Call::ok(
            "bash",
            cmd(&format!("grep -h 'region={}' {file}.1 {file} | head -n {n}", w.region.to_lowercase())),
            lines.join("\n"),
        ),
    );
    let first = super::build::timestamp(w.first_error_secs);
    let first_min = &first[11..16];
    let note = b.assistant(format!(
        "There it is: {} ({}) starts at {first} and from then on about a third of {} requests from {}/{} fail. Before {first_min} UTC there is not a single {}.",
        c.code, c.message, w.region, w.platform, w.release, c.code
    ));
    if probe {
        b.probe(
            ProbeKind::Recall,
            "first-error",
            q(
                format!("Which error code appears in the {} logs, and when does it first occur?", c.service),
                format!("{} ({}), first at {first}.", c.code, c.message),
                &[&[c.code], &[&first, first_min]],
            ),
            note,
        );
    }
}

fn deploys(rng: &mut Rng, b: &mut Builder, w: &World, probe: bool) {
    let c = w.c;
    let mut rows = Vec::new();
    let mut t = w.deploy_secs - 86_400 * 20;
    let services = ["auth-gateway", "payments-api", "sync-worker", "notify-svc", "web-frontend", "search-indexer"];
    while t < w.deploy_secs + 86_400 * 5 {
        t += 3600 * rng.range(2, 14) as i64 + 60 * (rng.range(0, 40) as i64 - 20);
        let svc = *rng.pick(&services);
        let ver = format!("{}.{}.{}", rng.range(1, 9), rng.range(0, 30), rng.range(0, 9));
        rows.push((
            t,
            vec![
                super::build::timestamp(t),
                svc.to_string(),
                ver,
                rng.pick(&["ci-bot", "release-train", "hotfix"]).to_string(),
                "succeeded".to_string(),
            ],
        ));
    }
    rows.push((
        w.deploy_secs,
        vec![
            super::build::timestamp(w.deploy_secs),
            format!("{}-app", w.platform),
            w.release.clone(),
            "release-train".to_string(),
            "succeeded".to_string(),
        ],
    ));
    rows.sort_by_key(|(t, _)| *t);
    let rows: Vec<Vec<String>> = rows.into_iter().map(|(_, r)| r).collect();
    let res = b.tool(
        "Which deploys happened around then?",
        Call::ok(
            "run_sql",
            sql(&format!(
                "select deployed_at, service, version, actor, status from ops.deploys where deployed_at between timestamp '{}' and timestamp '{}' order by deployed_at;",
                super::build::date(w.week_start(w.week) - 21),
                super::build::date(w.week_start(w.week) + 5)
            )),
            table(&["deployed_at", "service", "version", "actor", "status"], &rows),
        ),
    );
    if probe {
        let at = super::build::timestamp(w.deploy_secs);
        b.probe(
            ProbeKind::Recall,
            "release",
            q(
                format!(
                    "Which {} app release went out just before the {} errors started, and when?",
                    w.platform, c.code
                ),
                format!("{} at {at}.", w.release),
                &[&[&w.release], &[&at]],
            ),
            res.results[0],
        );
    }
}

fn csv_dump(rng: &mut Rng, b: &mut Builder, w: &World) {
    let n = rng.between(250, 520);
    let mut out = String::from(
        "user_id,signup_date,platform,app_version,region,plan,sessions_prev_week,sessions_this_week,last_error_code\n",
    );
    for _ in 0..n {
        let plat = *rng.pick(PLATFORMS);
        let affected = plat == w.platform && rng.chance(60);
        let prev = rng.range(1, 40);
        let this = if affected { prev * rng.range(0, 4) / 10 } else { (prev + rng.range(0, 6)).saturating_sub(3) };
        out.push_str(&format!(
            "u_{},{},{},{},{},{},{},{},{}\n",
            rng.digits(8),
            super::build::date(w.week_start(w.week) - rng.range(30, 900) as i64),
            plat,
            if affected {
                w.release.clone()
            } else {
                format!("{}.{}.{}", rng.range(3, 6), rng.range(0, 19), rng.range(0, 3))
            },
            w.region,
            rng.pick(&["free", "free", "plus", "pro"]),
            prev,
            this,
            if affected { w.c.code } else { "" }
        ));
    }
    let file = format!("/data/exports/{}_{}_users_{}.csv", w.c.slug, w.region.to_lowercase(), w.week_label(w.week));
    b.tool(
        format!("The support team exported the affected {} users; a look at the raw file.", w.region),
        Call::ok("bash", cmd(&format!("head -n {} {file}", n + 1)), out),
    );
    b.assistant(format!(
        "In the export, the users whose sessions collapsed are almost all on {}/{} with last_error_code {}; users on other versions kept their usual activity.",
        w.platform, w.release, w.c.code
    ));
}

fn pandas(rng: &mut Rng, b: &mut Builder, w: &World, files: &mut Vec<String>) {
    let k = files.len();
    let (path, what) = if k == 0 {
        (format!("out/{}_{}_by_platform.csv", w.c.metric_col, w.region.to_lowercase()), "the weekly metric by platform")
    } else if k == 1 {
        (format!("out/{}_drop_{}.png", w.c.metric_col, w.week_label(w.week)), "the chart")
    } else {
        (format!("out/affected_users_{}_{}.csv", w.region.to_lowercase(), k), "the affected users")
    };
    let src = format!(
        "import pandas as pd\ndf = pd.read_sql(open('queries/weekly_by_platform.sql').read(), conn)\npivot = df.pivot_table(index='week', columns='platform', values='{}', aggfunc='sum')\nprint(pivot.tail(12))\nprint(pivot.pct_change().tail(4).round(3))\n{}",
        w.c.metric_col,
        if path.ends_with(".png") {
            format!("ax = pivot.plot(figsize=(10, 4), title='{} by platform, {}')\nax.figure.savefig('{path}', dpi=144)", w.c.metric, w.region)
        } else {
            format!("pivot.to_csv('{path}')")
        }
    );
    let mut table_out = format!("platform     {:>10} {:>10} {:>10}\nweek\n", "android", "ios", "web");
    let bases: Vec<u64> = PLATFORMS.iter().map(|_| rng.range(20_000, 400_000)).collect();
    for i in (0..12).rev() {
        let wk = w.week - i;
        let vals: Vec<String> = PLATFORMS
            .iter()
            .zip(&bases)
            .map(|(p, base)| {
                let mut v = base + rng.range(0, base / 50) - base / 100;
                if *p == w.platform && i == 0 {
                    v = v * (100 - 2 * w.drop_pct) / 100;
                }
                v.to_string()
            })
            .collect();
        table_out.push_str(&format!("{:<12} {:>10} {:>10} {:>10}\n", w.week_label(wk), vals[0], vals[1], vals[2]));
    }
    table_out.push_str("\nplatform     android    ios    web\nweek\n");
    for i in (0..4).rev() {
        let wk = w.week - i;
        let mut pct = |p: &str| {
            let v =
                if p == w.platform && i == 0 { -(2 * w.drop_pct as i64) * 10 } else { rng.range(0, 40) as i64 - 20 };
            decimal(v, 3)
        };
        table_out.push_str(&format!(
            "{:<12} {:>7} {:>6} {:>6}\n",
            w.week_label(wk),
            pct("android"),
            pct("ios"),
            pct("web")
        ));
    }
    let r = b.tool(
        format!("Writing {what} to ./{path} so you can use it in the review."),
        Call::ok("python", code(&src), table_out),
    );
    b.assistant(format!(
        "Saved ./{path}. The {} column shows the drop in {}; the other platforms move by less than two percent.",
        w.platform,
        w.week_label(w.week)
    ));
    if files.len() < 2 {
        b.probe(
            ProbeKind::Artifact,
            &format!("file-{}", files.len() + 1),
            q(format!("Where did the agent save {what}?"), format!("./{path}"), &[&[&format!("./{path}"), &path]]),
            r.call,
        );
    }
    files.push(path);
}

fn interjection(rng: &mut Rng, b: &mut Builder, w: &World, step: usize) {
    let topic = step / 6 % 4;
    let (ask, key, reply) = match topic {
        0 => (
            "Quick one: don't use analytics.sessions for any of this, its timestamps are stored in local time and the DST switch messes it up. Stick to events.".to_string(),
            "analytics.sessions",
            "Noted: no analytics.sessions; everything stays on events_v3 with UTC timestamps.".to_string(),
        ),
        1 => (
            format!("Can you check whether paying users in {} are hit harder? Finance will ask.", w.region),
            "paying users",
            "Checking plan mix among affected users next.".to_string(),
        ),
        2 => (
            "For the review, report the drop as a range, not a point estimate. The backfill is not done.".to_string(),
            "range",
            "Understood: I'll give a range and flag the backfill.".to_string(),
        ),
        _ => (
            format!("Leave {} out of the chart, it has its own issue this week.", rng.pick(&["web", "LATAM", "the beta cohort"])),
            "chart",
            "OK, excluded from the chart.".to_string(),
        ),
    };
    let u = b.user(ask);
    if topic == 0 {
        b.probe(
            ProbeKind::Decision,
            "no-sessions",
            q(
                "Which table did the user rule out mid-analysis, and why?",
                "analytics.sessions, because its timestamps are local time and DST breaks them.".to_string(),
                &[&[key], &["local time"]],
            ),
            u,
        );
    }
    b.assistant(reply);
    // A plan-mix query to go with it.
    let mut rows = Vec::new();
    for plan in ["free", "plus", "pro", "team"] {
        for p in PLATFORMS {
            rows.push(vec![
                plan.to_string(),
                p.to_string(),
                rng.range(100, 90_000).to_string(),
                decimal(rng.range(0, 400) as i64 - 200, 1) + "%",
            ]);
        }
    }
    b.tool(
        "",
        Call::ok(
            "run_sql",
            sql(&format!(
                "select u.plan, e.platform, count(distinct e.user_id) as users, round(100.0 * (count(distinct e.user_id) - lag_users) / lag_users, 1) as change\nfrom analytics.events_v3 e join analytics.users u using (user_id)\nwhere u.region = '{}' and u.email not like '%{}' group by 1, 2;",
                w.region, w.internal_domain
            )),
            table(&["plan", "platform", "users", "change"], &rows),
        ),
    );
}
