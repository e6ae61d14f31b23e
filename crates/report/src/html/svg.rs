//! Inline SVG charts: the Pareto scatter with its frontier; and the downsampling of the
//! context-size timeline (the sawtooth), which the page's script draws. Plain strings, no
//! script: every mark carries a `<title>` the browser shows as a tooltip. Every label goes
//! through [`escape`].

use runlog::record::CallPoint;

use super::escape;

/// A linear map from a data range to a pixel range.
#[derive(Debug, Clone, Copy)]
struct Scale {
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
}

impl Scale {
    fn at(&self, v: f64) -> f64 {
        if (self.d1 - self.d0).abs() < f64::EPSILON {
            (self.r0 + self.r1) / 2.0
        } else {
            self.r0 + (v - self.d0) / (self.d1 - self.d0) * (self.r1 - self.r0)
        }
    }
}

/// The round step (1, 2 or 5 times a power of ten) that cuts `lo..=hi` into about `n` parts.
fn nice_step(lo: f64, hi: f64, n: usize) -> f64 {
    let raw = (hi - lo) / n.max(1) as f64;
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power)
}

/// About `n` round tick values covering `lo..=hi` (steps of 1, 2 or 5 times a power of ten).
pub(crate) fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo || n == 0 {
        return vec![lo];
    }
    let step = nice_step(lo, hi, n);
    // A hair of slack, so a bound that is itself a tick (0.3 as 3 * 0.1) is not lost to rounding.
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// An axis range fitted to `values`: their span with a margin of 8% of it on each side (at
/// least `min_margin`), widened to round ticks, and kept within `floor..=ceiling`.
pub(crate) fn fitted_range(
    values: impl IntoIterator<Item = f64>,
    min_margin: f64,
    floor: f64,
    ceiling: f64,
) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (floor, (floor + 1.0).min(ceiling));
    }
    let margin = ((hi - lo) * 0.08).max(min_margin);
    let (lo, hi) = ((lo - margin).max(floor), (hi + margin).min(ceiling));
    // Bounds on a round value, finer than the ticks so the margin stays small.
    let step = nice_step(lo, hi, 10);
    let lo = ((lo / step).floor() * step).max(floor);
    let hi = ((hi / step).ceil() * step).min(ceiling);
    (lo, hi)
}

fn px(v: f64) -> String {
    format!("{:.1}", v)
}

/// One configuration in a Pareto chart.
#[derive(Debug, Clone)]
pub(crate) struct ParetoPoint {
    pub config_id: String,
    pub strategy: String,
    pub color: &'static str,
    /// The cost axis (lower is better).
    pub x: f64,
    /// Retention (higher is better).
    pub y: f64,
    pub ci: Option<(f64, f64)>,
    /// May stand on the frontier: false for a configuration that never compacted (not
    /// exercised) or whose conversations met a rejected call while others completed; such a
    /// point is drawn hollow.
    pub eligible: bool,
}

/// Indices of the points on the Pareto frontier (no other eligible point has lower-or-equal x
/// and higher y, or lower x and equal y), sorted by x; only eligible points stand on it.
pub(crate) fn frontier(points: &[ParetoPoint]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..points.len()).filter(|&i| points[i].eligible).collect();
    order.sort_by(|&a, &b| points[a].x.total_cmp(&points[b].x).then(points[b].y.total_cmp(&points[a].y)));
    let mut best = f64::NEG_INFINITY;
    let mut out = Vec::new();
    for i in order {
        if points[i].y > best {
            best = points[i].y;
            out.push(i);
        }
    }
    out
}

/// A scatter of retention against a cost axis, with confidence bars and the frontier as a
/// dashed step line that continues level from its last point to the right edge.
pub(crate) fn pareto_chart(x_label: &str, x_fmt: fn(f64) -> String, points: &[ParetoPoint]) -> String {
    let (w, h) = (640.0, 380.0);
    let (left, right, top, bottom) = (58.0, 18.0, 14.0, 46.0);
    // Both axes fitted to the points (retention with its intervals), with a margin: a 0-100%
    // axis squeezes configurations that all keep 80-100% into a fifth of the chart.
    let (x_lo, x_hi) = {
        let max = points.iter().map(|p| p.x).fold(0.0f64, f64::max);
        fitted_range(points.iter().map(|p| p.x), if max > 0.0 { max * 0.05 } else { 0.5 }, 0.0, f64::INFINITY)
    };
    let (y_lo, y_hi) = fitted_range(
        points.iter().flat_map(|p| [Some(p.y), p.ci.map(|c| c.0), p.ci.map(|c| c.1)]).flatten(),
        0.02,
        0.0,
        1.0,
    );
    let xs = Scale { d0: x_lo, d1: x_hi, r0: left, r1: w - right };
    let ys = Scale { d0: y_lo, d1: y_hi, r0: h - bottom, r1: top };
    let range = format!(
        "retention axis {:.0}%–{:.0}%; {x_label} axis {}–{}",
        y_lo * 100.0,
        y_hi * 100.0,
        x_fmt(x_lo),
        x_fmt(x_hi)
    );
    let mut s = format!(
        r#"<svg viewBox="0 0 {w} {h}" role="img" aria-label="{}" data-y-range="{y_lo:.4} {y_hi:.4}"><title>{}</title>"#,
        escape(&format!("retention against {x_label}")),
        escape(&format!("retention against {x_label} ({range})")),
    );
    for t in nice_ticks(y_lo, y_hi, 5) {
        let y = ys.at(t);
        s.push_str(&format!(
            r#"<line class="gridline" x1="{}" x2="{}" y1="{}" y2="{}"/><text x="{}" y="{}" text-anchor="end">{}%</text>"#,
            px(left),
            px(w - right),
            px(y),
            px(y),
            px(left - 6.0),
            px(y + 4.0),
            (t * 100.0).round()
        ));
    }
    for t in nice_ticks(x_lo, x_hi, 5) {
        let x = xs.at(t);
        s.push_str(&format!(
            r#"<line class="gridline" x1="{}" x2="{}" y1="{}" y2="{}"/><text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            px(x),
            px(x),
            px(top),
            px(h - bottom),
            px(x),
            px(h - bottom + 16.0),
            escape(&x_fmt(t))
        ));
    }
    s.push_str(&format!(
        r#"<line class="axis" x1="{l}" x2="{r}" y1="{b}" y2="{b}"/><line class="axis" x1="{l}" x2="{l}" y1="{t}" y2="{b}"/>"#,
        l = px(left),
        r = px(w - right),
        b = px(h - bottom),
        t = px(top)
    ));
    s.push_str(&format!(
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate(14 {}) rotate(-90)" text-anchor="middle">retention</text>"#,
        px((left + w - right) / 2.0),
        px(h - 8.0),
        escape(x_label),
        px((top + h - bottom) / 2.0)
    ));
    let front = frontier(points);
    if !front.is_empty() {
        let mut d = String::new();
        for (k, &i) in front.iter().enumerate() {
            let (x, y) = (xs.at(points[i].x), ys.at(points[i].y));
            if k == 0 {
                d.push_str(&format!("M{} {}", px(x), px(y)));
            } else {
                // A step: more retention costs more, so the frontier rises only at each point.
                d.push_str(&format!(" H{} V{}", px(x), px(y)));
            }
        }
        // Past its last point the frontier stays level to the chart's edge: paying more buys
        // no more retention. So a frontier of one point is drawn too.
        d.push_str(&format!(" H{}", px(w - right)));
        s.push_str(&format!(r#"<path class="frontier" d="{d}"><title>Pareto frontier</title></path>"#));
    }
    for (i, p) in points.iter().enumerate() {
        let (x, y) = (xs.at(p.x), ys.at(p.y));
        let ci_text = match p.ci {
            Some((lo, hi)) => {
                s.push_str(&format!(
                    r#"<line x1="{x}" x2="{x}" y1="{}" y2="{}" stroke="{}" stroke-width="1" opacity="0.6"/>"#,
                    px(ys.at(lo)),
                    px(ys.at(hi)),
                    p.color,
                    x = px(x)
                ));
                format!(" [{:.1}%, {:.1}%]", lo * 100.0, hi * 100.0)
            }
            None => String::new(),
        };
        let on_front = front.contains(&i);
        s.push_str(&format!(
            r#"<circle class="point" cx="{}" cy="{}" r="{}" fill="{}" stroke="{}" stroke-width="{}"><title>{}</title></circle>"#,
            px(x),
            px(y),
            if on_front { 5.5 } else { 4.5 },
            if p.eligible { p.color } else { "#ffffff" },
            if on_front {
                "#1d2330"
            } else if p.eligible {
                "#ffffff"
            } else {
                p.color
            },
            if on_front { 1.6 } else { 1.0 },
            escape(&format!(
                "{} ({}){}\nretention {:.1}%{}\n{}: {}{}",
                p.config_id,
                p.strategy,
                if p.eligible {
                    ""
                } else {
                    ", off the frontier: not exercised or rejected calls"
                },
                p.y * 100.0,
                ci_text,
                x_label,
                x_fmt(p.x),
                if on_front { "\non the Pareto frontier" } else { "" }
            ))
        ));
    }
    s.push_str("</svg>");
    s.push_str(&format!("<p class=\"axis-range\">{}</p>", escape(&range)));
    s
}

/// Keep at most about `max` points of a timeline: the calls are cut into `max / 2` buckets
/// and each bucket keeps its smallest and largest request (in call order), so every peak and
/// every trough of the sawtooth survives. The first and last calls are always kept.
pub(crate) fn downsample(points: &[CallPoint], max: usize) -> Vec<CallPoint> {
    if points.len() <= max || max < 4 {
        return points.to_vec();
    }
    let buckets = max / 2;
    let size = points.len().div_ceil(buckets);
    let mut out: Vec<CallPoint> = Vec::with_capacity(max + 2);
    for chunk in points.chunks(size) {
        let lo = chunk.iter().enumerate().min_by_key(|(_, p)| p.request_tokens).map(|(i, _)| i).unwrap_or(0);
        let hi = chunk.iter().enumerate().max_by_key(|(_, p)| p.request_tokens).map(|(i, _)| i).unwrap_or(0);
        let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push(chunk[a]);
        if b != a {
            out.push(chunk[b]);
        }
    }
    if let (Some(first), Some(kept)) = (points.first(), out.first()) {
        if first.call != kept.call {
            out.insert(0, *first);
        }
    }
    if let (Some(last), Some(kept)) = (points.last(), out.last()) {
        if last.call != kept.call {
            out.push(*last);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(call: u32, tokens: u64) -> CallPoint {
        CallPoint {
            call,
            message_index: call as usize * 2,
            request_tokens: tokens,
            estimate: tokens,
            cached_tokens: 0,
            compacted: false,
            overflow: false,
            check_tokens: 0,
            check_estimate: 0,
        }
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t = nice_ticks(0.0, 1.0, 5);
        let expected = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0];
        assert_eq!(t.len(), expected.len(), "{t:?}");
        assert!(t.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-9), "{t:?}");
        let t = nice_ticks(0.0, 130_000.0, 4);
        assert_eq!(t.first(), Some(&0.0));
        assert!(t.iter().all(|v| v % 50_000.0 == 0.0), "{t:?}");
        assert_eq!(nice_ticks(3.0, 3.0, 4), vec![3.0]);
    }

    #[test]
    fn fitted_ranges_hold_the_values_with_a_small_margin_on_round_bounds() {
        // Retentions of 82-97%: the axis holds them, within 0-100%, far from starting at 0.
        let (lo, hi) = fitted_range([0.82, 0.9, 0.97], 0.02, 0.0, 1.0);
        assert!((0.7..=0.82).contains(&lo) && (0.97..=1.0).contains(&hi), "{lo} {hi}");
        assert!(((lo * 100.0).round() - lo * 100.0).abs() < 1e-9, "a round bound: {lo}");
        // Never past the floor or the ceiling; nothing to fit: 0 to 1.
        assert_eq!(fitted_range([0.0, 1.0], 0.02, 0.0, 1.0), (0.0, 1.0));
        assert_eq!(fitted_range(std::iter::empty(), 0.02, 0.0, 1.0), (0.0, 1.0));
        // One value: the minimum margin around it.
        let (lo, hi) = fitted_range([0.5], 0.02, 0.0, 1.0);
        assert!(lo < 0.5 && hi > 0.5 && hi - lo < 0.1, "{lo} {hi}");
    }

    #[test]
    fn the_frontier_keeps_only_undominated_points() {
        let p = |x: f64, y: f64| ParetoPoint {
            config_id: format!("{x}-{y}"),
            strategy: "s".into(),
            color: "#000",
            x,
            y,
            ci: None,
            eligible: true,
        };
        let mut points = vec![p(1.0, 0.5), p(2.0, 0.4), p(2.0, 0.9), p(0.5, 0.2), p(3.0, 0.9), p(4.0, 1.0)];
        let f: Vec<String> = frontier(&points).into_iter().map(|i| points[i].config_id.clone()).collect();
        assert_eq!(f, ["0.5-0.2", "1-0.5", "2-0.9", "4-1"]);
        // A point that may not stand on the frontier (not exercised, rejected calls) neither
        // stands on it nor hides the points it would dominate.
        points.push(ParetoPoint { eligible: false, ..p(0.1, 1.0) });
        let f: Vec<String> = frontier(&points).into_iter().map(|i| points[i].config_id.clone()).collect();
        assert_eq!(f, ["0.5-0.2", "1-0.5", "2-0.9", "4-1"]);
    }

    #[test]
    fn downsampling_keeps_peaks_troughs_and_ends() {
        let small: Vec<CallPoint> = (0..50).map(|i| point(i, u64::from(i) * 10)).collect();
        assert_eq!(downsample(&small, 100), small);

        // A sawtooth of 10,000 calls: rises by 10 per call, drops every 97 calls.
        let big: Vec<CallPoint> = (0..10_000u32).map(|i| point(i, 1_000 + u64::from(i % 97) * 10)).collect();
        let kept = downsample(&big, 200);
        assert!(kept.len() <= 202, "{} points kept", kept.len());
        assert_eq!(kept.first().map(|p| p.call), Some(0));
        assert_eq!(kept.last().map(|p| p.call), Some(9_999));
        let max = kept.iter().map(|p| p.request_tokens).max();
        let min = kept.iter().map(|p| p.request_tokens).min();
        assert_eq!(max, Some(1_960), "the highest tooth survives");
        assert_eq!(min, Some(1_000), "the lowest trough survives");
        assert!(kept.windows(2).all(|w| w[0].call < w[1].call), "call order is kept");
    }
}
