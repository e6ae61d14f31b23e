//! The verdict section that opens the page: per window the best configuration with its
//! figures and how sure that is, the front, the warnings; then, folded, every configuration
//! off the front with what beats it, and the sweeps. One block per dataset view, switched with
//! the page's dataset switch.

use super::{escape, Page};
use crate::verdict::render::{
    completion, cost, dataset_label, difference, evidence, exercised, label, retention, window_label,
};
use crate::verdict::{Standing, Verdict, View};

impl Page<'_> {
    pub(super) fn verdict(&self, out: &mut String) {
        out.push_str("<section class=\"verdict-section\">\n<h2 id=\"verdict\">Verdict</h2>\n");
        let v = match &self.verdict {
            Ok(v) => v,
            Err(e) => {
                out.push_str(&format!("<p class=\"bad\">No verdict: {}</p>\n</section>\n", escape(e)));
                return;
            }
        };
        for w in &v.warnings {
            out.push_str(&format!("<p class=\"warning\">⚠ {}</p>\n", escape(&w.message)));
        }
        out.push_str(
            "<p class=\"note\">Per window, the configuration to ship: the first of the Pareto front over completion, \
             at-risk retention and cost per conversation, the front decided by paired comparisons (two configurations \
             on the conversations both replayed, retention on the probes at risk under both); the cheapest of a tie \
             when the front's best cannot be told apart from others on 20 or more conversations compacted under both. \
             <i>How sure</i> compares the best with the front's second, conversation by conversation: a difference \
             whose interval covers 0 is not detectable, and a comparison on fewer than 20 conversations compacted \
             under both says so.</p>\n",
        );
        self.switch(out);
        for (i, dataset) in self.views.iter().enumerate() {
            out.push_str(&format!("<div class=\"verdict-view\"{}>\n", self.view_attrs(dataset, i)));
            verdict_view(out, v, dataset);
            out.push_str("</div>\n");
        }
        if !v.notes.is_empty() {
            out.push_str("<ul class=\"note\">");
            for n in &v.notes {
                out.push_str(&format!("<li>{}</li>", escape(n)));
            }
            out.push_str("</ul>\n");
        }
        out.push_str("</section>\n");
    }
}

/// The views of every window for one dataset (or the pooled one).
fn views_of<'a>(v: &'a Verdict, dataset: &'a str) -> impl Iterator<Item = (Option<u64>, &'a View)> + 'a {
    v.windows.iter().filter_map(move |w| w.views.iter().find(|x| x.dataset == dataset).map(|x| (w.window, x)))
}

pub(crate) fn verdict_view(out: &mut String, v: &Verdict, dataset: &str) {
    out.push_str(
        "<div class=\"scroll\"><table class=\"verdict\">\n<thead><tr><th>window</th><th>pick</th><th>completion</th>\
         <th>at-risk retention</th><th>cost / conv.</th><th>how sure</th><th>front</th></tr></thead>\n<tbody>\n",
    );
    for (w, view) in views_of(v, dataset) {
        let best = view.pick();
        let sure = match (view.tie_line(), view.best.as_ref().and_then(|b| b.runner_up.as_ref())) {
            (Some(tie), _) => tie,
            (None, None) if best.is_some() => "alone on the front".to_string(),
            (None, None) => "–".to_string(),
            (None, Some(c)) => format!(
                "against {}: retention {}; {}",
                view.label_of(view.front.get(1).map(String::as_str).unwrap_or("")),
                difference(&c.retention, false),
                evidence(c)
            ),
        };
        let cell = |f: &dyn Fn(&crate::verdict::Entry) -> String| best.map(f).unwrap_or_else(|| "–".into());
        out.push_str(&format!(
            "<tr><td class=\"nowrap\">{}</td><td class=\"nowrap\"{}><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&window_label(w)),
            best.map(|e| format!(" title=\"{}\"", escape(&e.config_id))).unwrap_or_default(),
            escape(&cell(&|e| if view.tie.is_some() { format!("{} (cheapest of a tie)", label(e)) } else { label(e) })),
            escape(&cell(&|e| completion(&e.completion))),
            escape(&cell(&|e| retention(&e.retention))),
            escape(&cell(&|e| cost(&e.cost))),
            escape(&sure),
            escape(&view.front_labels().join(", ")),
        ));
    }
    out.push_str("</tbody>\n</table></div>\n");
    out.push_str("<ul class=\"warnings\">\n");
    for (w, view) in views_of(v, dataset) {
        out.push_str(&format!(
            "<li class=\"note\">{}, {}: {}</li>\n",
            escape(&window_label(w)),
            escape(&dataset_label(&view.dataset)),
            escape(&view.basis())
        ));
        if let Some(state) = &view.state {
            out.push_str(&format!("<li class=\"state\"><b>{}: {}</b></li>\n", escape(&window_label(w)), escape(state)));
        }
        if let Some(readiness) = &view.readiness {
            out.push_str(&format!(
                "<li class=\"readiness\">{}: {}</li>\n",
                escape(&window_label(w)),
                escape(readiness)
            ));
        }
        for warning in &view.warnings {
            let names: Vec<String> = warning.configurations.iter().map(|c| view.label_of(c)).collect();
            let names = if names.is_empty() { String::new() } else { format!(": {}", names.join(", ")) };
            out.push_str(&format!(
                "<li class=\"warning\">⚠ {}: {}{}</li>\n",
                escape(&window_label(w)),
                escape(&warning.message),
                escape(&names)
            ));
        }
        for line in view.sweep_lines() {
            out.push_str(&format!("<li>{}: sweep: {}</li>\n", escape(&window_label(w)), escape(&line)));
        }
    }
    out.push_str("</ul>\n");
    out.push_str("<details><summary>Off the front: what beats each configuration, and by how much</summary>\n");
    out.push_str(
        "<div class=\"scroll\"><table class=\"verdict-rest\">\n<thead><tr><th>window</th><th>configuration</th>\
         <th>beaten by</th><th>completion</th><th>at-risk retention (paired)</th><th>cost / conv.</th><th>rests on</th></tr></thead>\n<tbody>\n",
    );
    for (w, view) in views_of(v, dataset) {
        for e in &view.configurations {
            let cells = match &e.standing {
                Standing::Front => continue,
                Standing::Beaten(c) => [
                    view.label_of(&c.by),
                    difference(&c.completion, false),
                    difference(&c.retention, false),
                    difference(&c.cost, true),
                    evidence(c),
                ],
                Standing::NotRanked { reason } => {
                    ["not ranked".into(), reason.clone(), String::new(), String::new(), String::new()]
                }
            };
            out.push_str(&format!(
                "<tr><td>{}</td><td title=\"{}\">{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&window_label(w)),
                escape(&e.config_id),
                escape(&label(e)),
                escape(&exercised(e, view.conversations)),
                escape(&cells[0]),
                escape(&cells[1]),
                escape(&cells[2]),
                escape(&cells[3]),
                escape(&cells[4])
            ));
        }
    }
    out.push_str("</tbody>\n</table></div>\n</details>\n");
    for (w, view) in views_of(v, dataset) {
        for sweep in &view.sweeps {
            sweep_chart(out, w, view, sweep);
        }
    }
}

/// One sweep: completion, paired at-risk retention and cost against the parameter's value,
/// each point with its 95% interval, filled when on the front.
fn sweep_chart(out: &mut String, window: Option<u64>, view: &View, sweep: &crate::verdict::Sweep) {
    const W: f64 = 220.0;
    const H: f64 = 110.0;
    const PAD: f64 = 28.0;
    let entries: Vec<(&crate::verdict::SweepPoint, &crate::verdict::Entry)> =
        sweep.points.iter().filter_map(|p| Verdict::entry(view, &p.config_id).map(|e| (p, e))).collect();
    if entries.is_empty() {
        return;
    }
    let n = entries.len();
    let x = |i: usize| PAD + (W - PAD - 8.0) * if n > 1 { i as f64 / (n - 1) as f64 } else { 0.5 };
    out.push_str(&format!(
        "<figure class=\"sweep\"><figcaption>{}</figcaption>\n",
        escape(&format!(
            "{} at {}: {} swept (filled: on the front)",
            sweep.strategy,
            window_label(window),
            sweep.parameter
        ))
    ));
    type Pick = fn(&crate::verdict::Entry) -> crate::verdict::Figure;
    let panels: [(&str, Pick, bool); 3] = [
        ("completion", |e| e.completion, false),
        ("paired at-risk retention", |e| e.retention, false),
        ("cost / conv.", |e| e.cost, true),
    ];
    for (name, pick, money) in panels {
        let top = if money {
            entries
                .iter()
                .filter_map(|(_, e)| pick(e).interval.map(|i| i.1).or(pick(e).value))
                .fold(0.0, f64::max)
                .max(1e-9)
        } else {
            1.0
        };
        let y = |v: f64| H - PAD + 8.0 - (H - PAD) * (v / top).clamp(0.0, 1.0);
        out.push_str(&format!(
            "<svg class=\"sweep-panel\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"{}\">",
            escape(name)
        ));
        out.push_str(&format!("<text x=\"{PAD}\" y=\"10\">{}</text>", escape(name)));
        out.push_str(&format!(
            "<line class=\"axis\" x1=\"{PAD}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
            W - 8.0,
            y(0.0),
            y(0.0)
        ));
        let mut path = Vec::new();
        for (i, (p, e)) in entries.iter().enumerate() {
            let f = pick(e);
            out.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x(i),
                H - 2.0,
                escape(&p.value)
            ));
            let Some(v) = f.value else { continue };
            path.push(format!("{:.1},{:.1}", x(i), y(v)));
            if let Some((lo, hi)) = f.interval {
                out.push_str(&format!(
                    "<line class=\"ci-bar\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
                    x(i),
                    x(i),
                    y(lo),
                    y(hi)
                ));
            }
            let shown = if money {
                cost(&f)
            } else if name == "completion" {
                completion(&f)
            } else {
                retention(&f)
            };
            out.push_str(&format!(
                "<circle class=\"{}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\"><title>{}</title></circle>",
                if p.on_front { "sweep-front" } else { "sweep-off" },
                x(i),
                y(v),
                escape(&format!("{}={}: {shown}", sweep.parameter, p.value))
            ));
        }
        if path.len() > 1 {
            out.push_str(&format!("<polyline class=\"sweep-line\" points=\"{}\"/>", path.join(" ")));
        }
        out.push_str("</svg>");
    }
    out.push_str("</figure>\n");
}
