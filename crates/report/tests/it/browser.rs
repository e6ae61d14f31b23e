//! The report in a real browser: headless Chromium opens `report.html` of a run over a hostile
//! conversation, from disk.
//!
//! Chromium is driven over its DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
//! messages ended by a NUL byte, commands on the browser's fd 3, answers and events on its fd
//! 4). A `sh -c 'exec ... 3<&0 4>&1'` wrapper gives it our stdin and stdout as those two fds,
//! so no websocket client and no new dependency are needed.
//!
//! What is checked:
//! - console: no `Runtime.consoleAPICalled` of type error or assert, no
//!   `Runtime.exceptionThrown`, no `Log.entryAdded` at level error (Chromium reports a
//!   Content-Security-Policy violation, e.g. a blocked injected script, as such an entry);
//! - network: with the `Network` domain on, every request the page makes is a
//!   `Network.requestWillBeSent` event; the only one allowed is the page itself (a request the
//!   CSP blocks still shows up there, and as a `Network.loadingFailed`);
//!   `performance.getEntriesByType('resource')` must be empty as well;
//! - the page's own script ran (it sets `data-ready`, so the CSP hash matches), the leaderboard
//!   has one row per configuration and sorts on a click (numeric columns by value), the charts
//!   are there with the frontier in both Pareto charts, retention by kind and compaction
//!   markers;
//! - at 800 px wide (every list opened, then each dataset picked in turn): the document never
//!   scrolls sideways (`document.scrollingElement.scrollWidth <= innerWidth`), the leaderboard's
//!   strategy column keeps its place while its table scrolls sideways, the Pareto charts come
//!   one block per window with their axes' ranges said, and after each pick no element of
//!   another dataset is visible while every section with per-dataset content shows the chosen
//!   one (`COMPACTLENS_REPORT_DIR` runs the same on a real run folder);
//! - the stand-in's summaries are labelled `stand-in` in the compaction events;
//! - the hostile text executed nothing: the title is the page's, no global was set, no `blink`,
//!   `img`, `iframe`, `link` or `javascript:` link exists, the body is visible, and the text
//!   `<script>document.title=` is on the page as text.
//!
//! A screenshot goes to `target/report-screenshot.png` (taken before the checks click around),
//! and the page beside it as `target/report-screenshot.html`.
//!
//! Without Chromium the test says so and passes, except when `CI` is set: there it fails.

#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long the whole browser session may take.
const DEADLINE: Duration = Duration::from_secs(90);

fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(p);
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")))
}

/// A Chromium driven over the DevTools pipe.
struct Browser {
    child: Child,
    commands: ChildStdin,
    messages: Receiver<Value>,
    next_id: u64,
    /// Every event received so far, in order.
    events: Vec<Value>,
    deadline: Instant,
    /// Chromium's stderr, quoted when it stops answering.
    log: PathBuf,
}

impl Browser {
    fn launch(chromium: &Path, profile: &Path, log: &Path) -> Browser {
        let stderr = std::fs::File::create(log).expect("log file");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null"#)
            .arg(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("chromium starts");
        let commands = child.stdin.take().expect("piped stdin");
        let out = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(out);
            loop {
                let mut buf = Vec::new();
                match reader.read_until(0, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if buf.last() == Some(&0) {
                            buf.pop();
                        }
                        match serde_json::from_slice::<Value>(&buf) {
                            Ok(v) => {
                                if tx.send(v).is_err() {
                                    break;
                                }
                            }
                            Err(_) => continue,
                        }
                    }
                }
            }
        });
        Browser {
            child,
            commands,
            messages: rx,
            next_id: 0,
            events: Vec::new(),
            deadline: Instant::now() + DEADLINE,
            log: log.to_path_buf(),
        }
    }

    fn next_message(&mut self, until: Instant) -> Option<Value> {
        let wait = until.min(self.deadline).saturating_duration_since(Instant::now());
        match self.messages.recv_timeout(wait) {
            Ok(v) => Some(v),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                panic!("chromium closed the DevTools pipe; its log:\n{log}")
            }
        }
    }

    /// Send a command (to a page session when `session` is given) and wait for its answer,
    /// keeping the events that arrive meanwhile.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).expect("serializes");
        bytes.push(0);
        self.commands.write_all(&bytes).and_then(|()| self.commands.flush()).expect("write to chromium");
        loop {
            let Some(v) = self.next_message(self.deadline) else {
                panic!("no answer to {method} before the deadline");
            };
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                if let Some(err) = v.get("error") {
                    panic!("{method} failed: {err}");
                }
                return v["result"].clone();
            }
            self.events.push(v);
        }
    }

    /// Wait for an event by name; keep every event.
    fn wait_for(&mut self, method: &str) {
        if self.events.iter().any(|e| e["method"] == method) {
            return;
        }
        loop {
            let Some(v) = self.next_message(self.deadline) else {
                panic!("no {method} before the deadline");
            };
            let found = v["method"] == method;
            self.events.push(v);
            if found {
                return;
            }
        }
    }

    /// Collect events for a while (late console messages, late requests).
    fn settle(&mut self, quiet: Duration) {
        let until = Instant::now() + quiet;
        while let Some(v) = self.next_message(until) {
            self.events.push(v);
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let clean: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace() && *b != b'=').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c) << (18 - 6 * i as u32);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

#[test]
fn base64_decoding() {
    assert_eq!(base64_decode("aGVsbG8gd29ybGQ="), b"hello world");
    assert_eq!(base64_decode("Zm9v"), b"foo");
    assert_eq!(base64_decode("Zg=="), b"f");
}

/// What the page reports about itself, evaluated in the page after load.
const PROBE_PAGE: &str = r#"(() => {
  const rows = () => Array.from(document.querySelectorAll('#leaderboard-table tbody tr'));
  const heads = Array.from(document.querySelectorAll('#leaderboard-table thead th'));
  const strategyCol = heads.findIndex(th => th.textContent.trim() === 'strategy');
  const before = rows().map(r => r.cells[strategyCol].textContent.trim());
  heads[strategyCol].click();
  const afterFirst = rows().map(r => r.cells[strategyCol].textContent.trim());
  heads[strategyCol].click();
  const afterSecond = rows().map(r => r.cells[strategyCol].textContent.trim());
  // Numeric columns sort by value (data-v), not as text: the first click sorts descending.
  const numericSorts = ['violations', 'conversations', 'failed', 'peak tokens', 'compactions / conv.', 'at-risk conv.']
    .map(name => {
      const col = heads.findIndex(th => th.textContent.trim() === name);
      if (col < 0) { return { name, values: null }; }
      heads[col].click();
      return { name, values: rows().map(r => parseFloat(r.cells[col].textContent)) };
    });
  const filter = document.querySelector('input[data-filter="leaderboard-table"]');
  filter.value = 'truncate';
  filter.dispatchEvent(new Event('input'));
  const visibleAfterFilter = rows().filter(r => !r.hidden).length;
  filter.value = '';
  filter.dispatchEvent(new Event('input'));
  // Lost facts are drawn when their list is opened (the toggle event, sent here at once).
  const lostRowsClosed = document.querySelectorAll('#lost-table tbody tr').length;
  const lostDetails = document.getElementById('lost-details');
  if (lostDetails) { lostDetails.open = true; lostDetails.dispatchEvent(new Event('toggle')); }
  const lostData = document.getElementById('lost-data');
  // Timelines are drawn for the conversation picked: pick each of the first few in turn.
  const picker = document.getElementById('timeline-select');
  const charts = () => document.querySelectorAll('#timeline-charts svg[aria-label="context size per call"]').length;
  const timelineCounts = picker ? Array.from(picker.options).slice(0, 5).map(o => {
    picker.value = o.value; picker.dispatchEvent(new Event('change')); return charts();
  }) : [];
  if (picker && picker.options.length) { picker.value = picker.options[0].value; picker.dispatchEvent(new Event('change')); }
  // Compaction events are drawn when their conversation is opened.
  const eventLists = document.querySelectorAll('details.events').length;
  const eventRowsClosed = document.querySelectorAll('details.events tr').length;
  document.querySelectorAll('details.events').forEach(d => { d.open = true; d.dispatchEvent(new Event('toggle')); });
  const eventRows = document.querySelectorAll('details.events tbody tr').length;
  const text = document.body.innerText;
  return JSON.stringify({
    lostRowsClosed,
    lostDataRows: lostData ? JSON.parse(lostData.textContent).rows.length : 0,
    lostRows: document.querySelectorAll('#lost-table tbody tr').length,
    lostFacts: document.querySelectorAll('#lost-table span.lost').length,
    dataBlocks: document.querySelectorAll('script[type="application/json"]').length,
    title: document.title,
    ready: document.documentElement.getAttribute('data-ready'),
    pwned: typeof window.__pwned !== 'undefined',
    blink: document.getElementsByTagName('blink').length,
    images: document.images.length,
    iframes: document.getElementsByTagName('iframe').length,
    links: document.getElementsByTagName('link').length,
    scripts: Array.from(document.scripts).filter(e => e.type !== 'application/json').length,
    styles: document.getElementsByTagName('style').length,
    javascriptLinks: Array.from(document.querySelectorAll('a')).filter(a => a.protocol === 'javascript:').length,
    bodyDisplay: getComputedStyle(document.body).display,
    svgs: document.querySelectorAll('svg').length,
    paretoPoints: Array.from(document.querySelectorAll('#pareto ~ .window-charts svg circle.point')).filter(e => !e.closest('[hidden]')).length,
    paretoCharts: Array.from(document.querySelectorAll('#pareto ~ .window-charts svg')).filter(e => !e.closest('[hidden]')).length,
    frontiers: Array.from(document.querySelectorAll('#pareto ~ .window-charts svg path.frontier')).filter(e => !e.closest('[hidden]')).length,
    kindCells: document.querySelectorAll('#kinds-table td.heat').length,
    compactionMarkers: document.querySelectorAll('svg[aria-label="context size per call"] line.event').length,
    thresholdLines: document.querySelectorAll('svg[aria-label="context size per call"] line.threshold').length,
    numericSorts,
    timelines: document.querySelectorAll('svg[aria-label="context size per call"]').length,
    timelineCounts, eventLists, eventRowsClosed, eventRows,
    visibleTimelines: Array.from(document.querySelectorAll('[data-conversation]')).filter(e => !e.hidden).length,
    leaderboardRows: rows().length,
    before, afterFirst, afterSecond, visibleAfterFilter,
    scriptTextShown: text.includes("<script>document.title='pwned'"),
    imgTextShown: text.includes('<img src=x onerror='),
    javascriptTextShown: text.includes('javascript:window.__pwned=3'),
    resources: performance.getEntriesByType('resource').map(e => e.name),
    costNotMeasured: document.getElementById('cost-not-measured') !== null,
    summaryLabels: Array.from(document.querySelectorAll('details.events tbody details > summary')).map(e => e.textContent),
  });
})()"#;

/// What a visit to a page found.
struct Visit {
    /// The page's answers to [`PROBE_PAGE`].
    facts: Value,
    /// Console errors and warnings, exceptions, failed loads.
    problems: Vec<String>,
    /// Every URL the page requested (the page itself included).
    requests: Vec<String>,
    url: String,
    png: Vec<u8>,
}

/// Open `page` from disk in a fresh headless Chromium, screenshot it to `target/<shot>.png`,
/// run [`PROBE_PAGE`] in it, and collect the console and network events.
fn visit(chromium: &Path, page: &Path, scratch: &Path, shot: &str) -> Visit {
    visit_with(chromium, page, scratch, shot, (1400, 2200), PROBE_PAGE)
}

/// [`visit`] at a viewport of `(width, height)`, evaluating `probe` (an expression that
/// returns a JSON string) in the page.
fn visit_with(chromium: &Path, page: &Path, scratch: &Path, shot: &str, viewport: (u32, u32), probe: &str) -> Visit {
    let page = std::fs::canonicalize(page).expect("the page exists");
    let url = format!("file://{}", page.display());
    let profile = scratch.join(format!("profile-{shot}"));
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::create_dir_all(&profile).expect("profile dir");
    let mut browser = Browser::launch(chromium, &profile, &scratch.join(format!("chromium-{shot}.log")));
    let target = browser.call(None, "Target.createTarget", json!({ "url": "about:blank" }));
    let target_id = target["targetId"].as_str().expect("target id").to_string();
    let attached = browser.call(None, "Target.attachToTarget", json!({ "targetId": target_id, "flatten": true }));
    let session = attached["sessionId"].as_str().expect("session id").to_string();
    let s = Some(session.as_str());
    for domain in ["Page.enable", "Runtime.enable", "Log.enable", "Network.enable"] {
        browser.call(s, domain, json!({}));
    }
    browser.call(
        s,
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": viewport.0, "height": viewport.1, "deviceScaleFactor": 1, "mobile": false }),
    );
    // Only events after this point concern the report.
    browser.events.clear();
    browser.call(s, "Page.navigate", json!({ "url": url }));
    browser.wait_for("Page.loadEventFired");
    browser.settle(Duration::from_millis(1500));

    let screenshot = browser.call(s, "Page.captureScreenshot", json!({ "format": "png" }));
    let png = base64_decode(screenshot["data"].as_str().expect("screenshot data"));
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    std::fs::create_dir_all(target_dir()).expect("target dir");
    let shot_path = target_dir().join(format!("{shot}.png"));
    std::fs::write(&shot_path, &png).expect("screenshot written");
    // The page itself beside it, to open by hand.
    std::fs::copy(&page, target_dir().join(format!("{shot}.html"))).expect("page copied");
    eprintln!("screenshot: {}", shot_path.display());

    let result = browser.call(s, "Runtime.evaluate", json!({ "expression": probe, "returnByValue": true }));
    let facts: Value = serde_json::from_str(result["result"]["value"].as_str().expect("the probe returns a string"))
        .expect("the probe returns JSON");
    browser.settle(Duration::from_millis(500));
    let _ = browser.call(None, "Browser.close", json!({}));

    let mut problems = Vec::new();
    let mut requests = Vec::new();
    for e in &browser.events {
        let p = &e["params"];
        match e["method"].as_str().unwrap_or("") {
            "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "assert" | "warning")) => {
                problems.push(format!("console {}: {}", p["type"], p["args"]))
            }
            "Runtime.exceptionThrown" => problems.push(format!("exception: {}", p["exceptionDetails"])),
            "Log.entryAdded" if matches!(p["entry"]["level"].as_str(), Some("error" | "warning")) => {
                problems.push(format!("log {}: {}", p["entry"]["source"], p["entry"]["text"]))
            }
            "Network.requestWillBeSent" => requests.push(p["request"]["url"].as_str().unwrap_or("").to_string()),
            "Network.loadingFailed" => problems.push(format!("request failed: {p}")),
            _ => {}
        }
    }
    Visit { facts, problems, requests, url, png }
}

/// The windows of a run's configurations (each conversation's own counts as one).
fn windows(data: &runlog::log::RunData) -> usize {
    let mut windows: Vec<Option<u64>> = data.manifest.experiment.configurations.iter().map(|c| c.window).collect();
    windows.sort();
    windows.dedup();
    windows.len()
}

/// The page at 800 px wide, after every list is opened and every dataset is picked in turn:
/// what is visible of each dataset, the Pareto charts per window, the leaderboard's first
/// column before and after its table is scrolled sideways, and the document's width.
const PROBE_LAYOUT: &str = r#"(() => {
  const visible = e => e.getClientRects().length > 0;
  const sectionOf = e => {
    let h = e;
    while (h && h.tagName !== 'H2') { h = h.previousElementSibling || h.parentElement; }
    return h ? h.id : null;
  };
  // Everything drawn on demand is drawn first, so the switch is checked on it too.
  const lostDetails = document.getElementById('lost-details');
  if (lostDetails) { lostDetails.open = true; lostDetails.dispatchEvent(new Event('toggle')); }
  document.querySelectorAll('details').forEach(d => { d.open = true; d.dispatchEvent(new Event('toggle')); });
  const wide = () => ({
    scrollWidth: document.scrollingElement.scrollWidth,
    innerWidth: window.innerWidth,
    // The elements that stick out past the window's right edge (none when the page fits).
    over: Array.from(document.querySelectorAll('body *')).filter(e => visible(e) && !e.closest('.scroll') &&
      e.getBoundingClientRect().right > window.innerWidth + 0.5).slice(0, 5)
      .map(e => e.tagName + '.' + e.className + '#' + e.id + ' ' + Math.round(e.getBoundingClientRect().right)),
  });
  const width = wide();
  // The leaderboard's first column stays put while its table scrolls sideways.
  const table = document.getElementById('leaderboard-table');
  const wrapper = table ? table.closest('.scroll') : null;
  const firstCell = table ? table.tBodies[0].rows[0].cells[0] : null;
  const head = table ? table.tHead.rows[0].cells[0].textContent.trim() : null;
  let sticky = null;
  if (wrapper && firstCell) {
    wrapper.scrollLeft = 0;
    const left0 = firstCell.getBoundingClientRect().left;
    const second0 = firstCell.nextElementSibling.getBoundingClientRect().left;
    wrapper.scrollLeft = 400;
    sticky = {
      head, scrolled: wrapper.scrollLeft, left0, left1: firstCell.getBoundingClientRect().left,
      second0, second1: firstCell.nextElementSibling.getBoundingClientRect().left,
      position: getComputedStyle(firstCell).position,
    };
    wrapper.scrollLeft = 0;
  }
  // The Pareto charts of the view shown: one block per window, its charts' retention axes.
  const pareto = () => Array.from(document.querySelectorAll('.window-charts')).filter(visible).map(v =>
    Array.from(v.querySelectorAll('.charts[data-window]')).map(c => ({
      window: c.getAttribute('data-window'),
      charts: Array.from(c.querySelectorAll('.chart')).filter(visible).length,
      svgs: c.querySelectorAll('svg').length,
      ranges: Array.from(c.querySelectorAll('svg[data-y-range]')).map(s => s.getAttribute('data-y-range')),
      axisNotes: c.querySelectorAll('.axis-range').length,
    })));
  const paretoFirst = pareto();
  const select = document.querySelector('select.dataset-switch');
  const options = select ? Array.from(select.options).map(o => o.value) : [];
  const picks = options.map(chosen => {
    select.value = chosen;
    select.dispatchEvent(new Event('change'));
    const views = Array.from(document.querySelectorAll('[data-dataset]')).filter(visible);
    const convs = Array.from(document.querySelectorAll('[data-of]')).filter(visible);
    return {
      chosen,
      views: Array.from(new Set(views.map(e => e.getAttribute('data-dataset')))),
      sections: Array.from(new Set(views.map(sectionOf))),
      of: Array.from(new Set(convs.map(e => e.getAttribute('data-of')))),
      ofSections: Array.from(new Set(convs.map(sectionOf))),
      pareto: pareto().length,
      width: wide(),
    };
  });
  return JSON.stringify({ width, sticky, paretoFirst, options, picks,
    sections: Array.from(document.querySelectorAll('h2[id]')).map(h => h.id) });
})()"#;

/// What every report must show at 800 px: the document never scrolls sideways, the
/// leaderboard's strategy column stays put while its table scrolls, one Pareto block per
/// window with its axis said, and each pick of the dataset switch shows that dataset's
/// elements only, in every section that has them.
fn assert_layout(v: &Visit, data: &runlog::log::RunData) {
    let f = &v.facts;
    assert!(v.problems.is_empty(), "console errors: {:#?}", v.problems);
    let fits = |w: &Value, when: &str| {
        let (scroll, inner) =
            (w["scrollWidth"].as_f64().expect("scrollWidth"), w["innerWidth"].as_f64().expect("width"));
        assert!(scroll <= inner, "{when}: the document scrolls sideways at {inner} px ({scroll} px wide): {w}");
    };
    fits(&f["width"], "opened");
    // The strategy column is sticky: scrolled 400 px sideways, its cell has not moved while
    // the next one has.
    let s = &f["sticky"];
    assert_eq!(s["head"], "strategy", "{s}");
    assert_eq!(s["position"], "sticky", "{s}");
    assert!(s["scrolled"].as_f64() > Some(0.0), "the leaderboard's table is wider than 800 px and scrolls: {s}");
    assert_eq!(s["left0"], s["left1"], "the strategy column stays put: {s}");
    assert!(s["second1"].as_f64() < s["second0"].as_f64(), "the other columns scroll: {s}");
    // One Pareto block per window, each with its charts and its axes' ranges said.
    let windows = windows(data);
    let blocks = f["paretoFirst"].as_array().expect("pareto");
    assert_eq!(blocks.len(), 1, "one dataset view of Pareto charts is shown: {f}");
    let per_window = blocks[0].as_array().expect("windows");
    assert_eq!(per_window.len(), windows, "one block of Pareto charts per window: {f}");
    let mut labels: Vec<&str> = per_window.iter().filter_map(|w| w["window"].as_str()).collect();
    labels.dedup();
    assert_eq!(labels.len(), windows, "each window once: {f}");
    for w in per_window {
        assert_eq!(w["svgs"], w["axisNotes"], "each chart says its axes' ranges: {w}");
        for range in w["ranges"].as_array().expect("ranges") {
            let r: Vec<f64> = range.as_str().unwrap_or("").split(' ').filter_map(|x| x.parse().ok()).collect();
            assert!(r.len() == 2 && 0.0 <= r[0] && r[0] < r[1] && r[1] <= 1.0, "a retention axis within 0-100%: {w}");
        }
    }
    // The dataset switch, picked to each dataset in turn.
    let options: Vec<&str> = f["options"].as_array().expect("options").iter().filter_map(|o| o.as_str()).collect();
    let datasets = report::summary::datasets(&report::summary::summarize(
        &data.manifest.experiment.configurations,
        &data.records,
        data.manifest.seed,
    ))
    .len();
    if datasets < 2 {
        assert!(options.is_empty(), "no switch for one dataset: {f}");
        return;
    }
    assert_eq!(options.len(), datasets + 1, "every dataset and the pooled view: {f}");
    let mut sections = vec!["verdict", "leaderboard", "families", "pareto", "kinds"];
    if !report::real::compare(data).is_empty() {
        sections.push("real-summaries");
    }
    for pick in f["picks"].as_array().expect("picks") {
        let chosen = pick["chosen"].as_str().expect("chosen");
        fits(&pick["width"], chosen);
        assert_eq!(pick["views"], json!([chosen]), "only the {chosen} view is visible: {pick}");
        for id in &sections {
            assert!(
                pick["sections"].as_array().expect("sections").iter().any(|s| s == id),
                "{id} shows {chosen}: {pick}"
            );
        }
        assert_eq!(pick["pareto"], 1, "one dataset's Pareto charts: {pick}");
        let of = pick["of"].as_array().expect("of");
        if chosen != "all" {
            assert!(of.iter().all(|d| d == chosen), "only {chosen}'s conversations are visible: {pick}");
        }
    }
}

/// The configurations the leaderboard ranks: those that can operate at their window.
fn ranked(data: &runlog::log::RunData) -> usize {
    let summaries =
        report::summary::summarize(&data.manifest.experiment.configurations, &data.records, data.manifest.seed);
    summaries.iter().filter(|s| s.dataset == report::summary::ALL_DATASETS && s.applicable).count()
}

/// What every report must show: it loaded clean, fetched nothing, its script ran, and its
/// leaderboard, charts and sorting work.
fn assert_clean_page(v: &Visit, name: &str, configurations: usize, ranked: usize, windows: usize) {
    let facts = &v.facts;
    assert!(v.problems.is_empty(), "console errors: {:#?}", v.problems);
    assert_eq!(v.requests, vec![v.url.clone()], "the only request is the page itself");
    assert_eq!(facts["resources"], json!([]), "no resource was fetched");
    // The page's own script ran: the CSP hash matches it.
    assert_eq!(facts["ready"], "1", "{facts}");
    assert_eq!(facts["title"], format!("compactlens: {name}"));
    assert_eq!(facts["scripts"], 1, "only the page's own script");
    assert_eq!(facts["styles"], 1, "only the page's own style");
    assert_eq!(facts["bodyDisplay"], "block");
    assert_eq!(facts["leaderboardRows"], ranked, "every configuration that can operate, and no other");
    assert!(facts["paretoPoints"].as_u64().unwrap_or(0) > 0, "the Pareto charts have points");
    assert!(facts["timelines"].as_u64().unwrap_or(0) > 0, "timelines are drawn");
    assert_eq!(facts["visibleTimelines"], 1, "the picker shows one conversation");
    // Drawn on demand from the embedded data: nothing before the list is opened, then rows.
    assert_eq!(facts["eventRowsClosed"], 0, "compaction events are drawn on demand: {facts}");
    if facts["eventLists"].as_u64() > Some(0) {
        assert!(facts["eventRows"].as_u64() >= facts["eventLists"].as_u64(), "opened, the events are drawn: {facts}");
    }
    assert_eq!(facts["lostRowsClosed"], 0, "lost facts are drawn on demand: {facts}");
    assert_eq!(facts["lostRows"], facts["lostDataRows"], "opened, every embedded row is drawn: {facts}");
    assert!(facts["lostFacts"].as_u64() >= facts["lostRows"].as_u64(), "each row names a lost fact: {facts}");
    let column = |k: &str| -> Vec<String> {
        facts[k].as_array().expect("array").iter().map(|v| v.as_str().unwrap_or("").to_string()).collect()
    };
    let mut descending = column("before");
    descending.sort();
    descending.reverse();
    assert_eq!(column("afterFirst"), descending, "the first click sorts descending");
    descending.reverse();
    assert_eq!(column("afterSecond"), descending, "the second click sorts ascending");
    // Each count column sorts by its number, not its text (70 after 354, not before).
    for sort in facts["numericSorts"].as_array().expect("numericSorts") {
        let values: Vec<f64> = sort["values"]
            .as_array()
            .unwrap_or_else(|| panic!("the leaderboard has a {} column", sort["name"]))
            .iter()
            .map(|v| v.as_f64().unwrap_or_else(|| panic!("{}: a cell that is not a number: {v}", sort["name"])))
            .collect();
        assert_eq!(values.len(), ranked);
        assert!(values.windows(2).all(|w| w[0] >= w[1]), "{} sorted descending by value: {values:?}", sort["name"]);
    }
    // The retention-by-kind table has a cell per kind and the mean for each configuration.
    assert_eq!(facts["kindCells"], 6 * configurations, "{facts}");
    // Only the shown dataset view counts: the others are hidden until the switch picks them.
    // Cost and tokens kept, per window (a run without a price has a note for cost instead).
    let per_window = if facts["costNotMeasured"] == true { 1 } else { 2 };
    assert_eq!(facts["paretoCharts"], per_window * windows, "cost and tokens kept per window: {facts}");
    // The screenshot is a real picture of the page, not a blank one.
    assert!(v.png.len() > 20_000, "screenshot of {} bytes looks blank", v.png.len());
}

fn chromium_or_skip() -> Option<PathBuf> {
    let found = find_chromium();
    if found.is_none() {
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!(
                "CI is set but Chromium is not installed: the browser test must run in CI (apt-get install chromium)"
            );
        }
        eprintln!("skipped: Chromium not found (install Debian's `chromium`, or set CHROMIUM to a Chrome binary)");
    }
    found
}

#[test]
fn the_report_opens_in_chromium_with_no_errors_no_requests_and_no_injected_code() {
    let Some(chromium) = chromium_or_skip() else { return };
    let root = crate::common::temp_dir("browser");
    let (run_dir, data) = crate::common::adversarial_run(&root);
    let configurations = data.manifest.experiment.configurations.len();
    let v = visit(&chromium, &run_dir.join("report.html"), &root, "report-screenshot");
    assert_clean_page(&v, crate::common::NAME, configurations, ranked(&data), windows(&data));
    let facts = &v.facts;

    // Nothing injected ran or became an element.
    assert_eq!(facts["pwned"], false);
    for (key, want) in [("blink", 0), ("images", 0), ("iframes", 0), ("links", 0), ("javascriptLinks", 0)] {
        assert_eq!(facts[key], want, "{key}: {facts}");
    }
    assert_eq!(facts["scriptTextShown"], true, "the injected script shows as text");
    assert_eq!(facts["imgTextShown"], true);
    assert_eq!(facts["javascriptTextShown"], true);
    // Every configuration has its point in both Pareto charts and a timeline per conversation.
    assert_eq!(facts["paretoPoints"], 2 * configurations, "one point per configuration in each Pareto chart");
    assert_eq!(
        facts["timelineCounts"],
        json!([configurations, configurations]),
        "a timeline per conversation and configuration"
    );
    assert_eq!(facts["timelines"], configurations, "the picked conversation's timelines");
    assert!(facts["svgs"].as_u64().unwrap_or(0) >= 2 + configurations as u64);
    assert_eq!(facts["visibleAfterFilter"], 1, "the filter keeps the truncate row");
    // Both Pareto charts draw their frontier.
    assert_eq!(facts["frontiers"], 2, "a frontier path in each Pareto chart: {facts}");
    // Compactions are marked on the timelines, and every compacting strategy draws a trigger.
    assert!(facts["compactionMarkers"].as_u64().unwrap_or(0) > 0, "compaction markers: {facts}");
    assert!(facts["thresholdLines"].as_u64().unwrap_or(0) > 0, "trigger lines: {facts}");
    // The run's summarizer is the offline stand-in: its summaries are labelled so, not with
    // the strategy's name.
    let labels = facts["summaryLabels"].as_array().expect("summary labels");
    assert!(!labels.is_empty(), "summaries listed: {facts}");
    assert!(labels.iter().all(|l| l.as_str().unwrap_or("").starts_with("stand-in summary · ")), "{labels:?}");
    let v = visit_with(&chromium, &run_dir.join("report.html"), &root, "report-800", (800, 1000), PROBE_LAYOUT);
    assert_layout(&v, &data);
    let _ = std::fs::remove_dir_all(&root);
}

/// A real run's report, named by `COMPACTLENS_REPORT_DIR` (absolute, or relative to the workspace
/// root; CI points it at the gate's run):
/// it must open as cleanly as the adversarial one. Without the variable there is nothing to
/// check.
#[test]
fn the_run_folder_named_by_the_environment_opens_cleanly() {
    let Some(dir) = std::env::var_os("COMPACTLENS_REPORT_DIR").filter(|d| !d.is_empty()).map(PathBuf::from) else {
        eprintln!("skipped: set COMPACTLENS_REPORT_DIR to a run folder to open its report.html");
        return;
    };
    // A relative path is taken from the workspace root (tests run in the crate's folder).
    let dir = if dir.is_relative() { Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(dir) } else { dir };
    let Some(chromium) = chromium_or_skip() else { return };
    let data = runlog::log::RunData::read(&dir).expect("COMPACTLENS_REPORT_DIR is a run folder");
    let scratch = crate::common::temp_dir("browser-run");
    let v = visit(&chromium, &dir.join("report.html"), &scratch, "report-run-screenshot");
    assert_clean_page(
        &v,
        &data.manifest.experiment.name,
        data.manifest.experiment.configurations.len(),
        ranked(&data),
        windows(&data),
    );
    let v = visit_with(&chromium, &dir.join("report.html"), &scratch, "report-run-800", (800, 1000), PROBE_LAYOUT);
    assert_layout(&v, &data);
    let _ = std::fs::remove_dir_all(&scratch);
}

/// The verdict's facts at 1280x800: where the best of the first window sits, the warnings,
/// and what each dataset switch shows before and after picking the last dataset.
const PROBE_VERDICT: &str = r#"(() => {
  const best = document.querySelector('.verdict-view:not([hidden]) table.verdict tbody tr');
  const box = best ? best.getBoundingClientRect() : null;
  const shown = () => Array.from(document.querySelectorAll('[data-dataset]')).filter(e => !e.hidden)
    .map(e => e.getAttribute('data-dataset'));
  const sectionsOf = () => Array.from(document.querySelectorAll('[data-dataset]')).filter(e => !e.hidden)
    .map(e => { let h = e; while (h && !(h.tagName === 'H2' || h.id === 'verdict')) { h = h.previousElementSibling || h.parentElement; } return h ? (h.id || h.tagName) : null; });
  const of = () => Array.from(document.querySelectorAll('[data-of]'))
    .filter(e => getComputedStyle(e).display !== 'none').map(e => e.getAttribute('data-of'));
  const before = { shown: shown(), sections: sectionsOf(), of: of() };
  const select = document.querySelector('select.dataset-switch');
  const options = Array.from(select.options).map(o => o.value);
  const chosen = options[options.length - 1];
  select.value = chosen;
  select.dispatchEvent(new Event('change'));
  const after = { shown: shown(), sections: sectionsOf(), of: of() };
  // Lost facts are drawn after the switch: the rows drawn then obey it too.
  const lostDetails = document.getElementById('lost-details');
  if (lostDetails) { lostDetails.open = true; lostDetails.dispatchEvent(new Event('toggle')); }
  const lostRows = Array.from(document.querySelectorAll('#lost-table tbody tr'));
  const lost = { rows: lostRows.length, shown: lostRows.filter(e => getComputedStyle(e).display !== 'none').map(e => e.getAttribute('data-of')) };
  return JSON.stringify({
    lost,
    bestTop: box ? box.top : null, bestBottom: box ? box.bottom : null, height: window.innerHeight,
    bestText: best ? best.textContent : '',
    warnings: Array.from(document.querySelectorAll('section.verdict-section .warning')).map(p => p.textContent),
    switches: document.querySelectorAll('select.dataset-switch').length,
    options, chosen, before, after,
  });
})()"#;

#[test]
fn the_verdict_opens_the_page_and_the_dataset_switch_moves_every_section() {
    let Some(chromium) = chromium_or_skip() else { return };
    let root = crate::common::temp_dir("browser-verdict");
    let (run_dir, data) = crate::verdict::ci_run_folder(&root);
    let v = visit_with(
        &chromium,
        &run_dir.join("report.html"),
        &root,
        "report-verdict-screenshot",
        (1280, 800),
        PROBE_VERDICT,
    );
    assert_verdict_first_and_switch(&v, "32k");
    let v = visit_with(&chromium, &run_dir.join("report.html"), &root, "report-verdict-800", (800, 1000), PROBE_LAYOUT);
    assert_layout(&v, &data);
    let _ = std::fs::remove_dir_all(&root);
}

/// The verdict's first row is on the first screen at 1280x800 and starts with `first_window`;
/// the stand-in warning leads; the dataset switch starts pooled and moves every section.
fn assert_verdict_first_and_switch(v: &Visit, first_window: &str) {
    let f = &v.facts;
    assert!(v.problems.is_empty(), "console errors: {:#?}", v.problems);
    // The best configuration of the first window is on the first screen.
    let (top, bottom) = (f["bestTop"].as_f64().expect("a best row"), f["bestBottom"].as_f64().expect("a best row"));
    assert!(top >= 0.0 && bottom <= 800.0, "the verdict's first row is at {top}..{bottom} of 800 px: {f}");
    assert!(f["bestText"].as_str().unwrap_or("").starts_with(first_window), "{f}");
    // The run's summarizer is the offline stand-in, and the verdict says so first.
    let warnings = f["warnings"].as_array().expect("warnings");
    assert!(warnings.iter().any(|w| w.as_str().unwrap_or("").contains("stand-in")), "{f}");
    // The switch starts on every dataset pooled, and picking a dataset moves every section.
    assert_eq!(f["options"][0], "all");
    let chosen = f["chosen"].as_str().expect("a dataset");
    let before: Vec<&str> = f["before"]["shown"].as_array().expect("shown").iter().filter_map(|v| v.as_str()).collect();
    let after: Vec<&str> = f["after"]["shown"].as_array().expect("shown").iter().filter_map(|v| v.as_str()).collect();
    assert!(before.iter().all(|d| *d == "all") && !before.is_empty(), "{f}");
    assert!(after.iter().all(|d| *d == chosen) && after.len() == before.len(), "{f}");
    assert_eq!(f["before"]["sections"], f["after"]["sections"], "the same sections switch: {f}");
    let sections = f["after"]["sections"].to_string();
    for id in ["verdict", "leaderboard", "families", "pareto", "kinds"] {
        assert!(sections.contains(id), "section {id} obeys the switch: {sections}");
    }
    // The per-conversation sections show only the chosen dataset's conversations.
    let of_after = f["after"]["of"].as_array().expect("of");
    assert!(of_after.iter().all(|d| d == chosen), "{f}");
    assert!(f["before"]["of"].as_array().expect("of").len() > of_after.len(), "{f}");
    let lost_shown = f["lost"]["shown"].as_array().expect("lost rows shown");
    assert!(!lost_shown.is_empty() && lost_shown.iter().all(|d| d == chosen), "{}", f["lost"]);
    assert!(f["lost"]["rows"].as_u64() > Some(lost_shown.len() as u64), "other datasets' rows hidden: {}", f["lost"]);
}

/// A run the size issue readers hit (36 configurations, 120 conversations, 8 datasets, the
/// stand-in summarizer): the page stays under its bound, opens on its verdict at 1280x800 with
/// the stand-in warning, its dataset switch moves every section, and it loads as cleanly as the
/// small runs' pages.
#[test]
fn a_generated_run_of_36_configurations_by_120_conversations_opens_on_its_verdict_within_its_bound() {
    let Some(chromium) = chromium_or_skip() else { return };
    let root = crate::common::temp_dir("browser-generated");
    let (run_dir, data) = crate::generated::run_folder(&root);
    let page = run_dir.join("report.html");
    let bytes = std::fs::metadata(&page).expect("report.html").len();
    assert!(bytes < report::html::MAX_REPORT_BYTES as u64, "{bytes} bytes");
    let v = visit_with(&chromium, &page, &root, "report-generated-verdict", (1280, 800), PROBE_VERDICT);
    assert_verdict_first_and_switch(&v, "16k");
    let v = visit(&chromium, &page, &root, "report-generated");
    assert_clean_page(
        &v,
        crate::generated::NAME,
        data.manifest.experiment.configurations.len(),
        ranked(&data),
        windows(&data),
    );
    assert_eq!(v.facts["timelineCounts"][0], data.manifest.experiment.configurations.len(), "{}", v.facts);
    let v = visit_with(&chromium, &page, &root, "report-generated-800", (800, 1000), PROBE_LAYOUT);
    assert_layout(&v, &data);
    let _ = std::fs::remove_dir_all(&root);
}
