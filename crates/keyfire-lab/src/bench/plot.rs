//! The lateness distribution as an SVG: a CDF (share of firings claimed within x ms), drawn
//! by hand. The x axis is logarithmic (`log10(1 + ms)`) so that a 2 ms median and a 2 s tail
//! are both readable; p50, p90, p99 and max are marked.

use std::fmt::Write;

use super::metrics::Percentiles;

const W: f64 = 800.0;
const H: f64 = 480.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// Axis ticks: 0, 1, 2, 5, 10, 20, 50, … up to the first one at or past `max`.
fn ticks(max: i64) -> Vec<i64> {
    let mut t = vec![0];
    let mut decade = 1;
    'outer: loop {
        for m in [1, 2, 5] {
            let v = m * decade;
            t.push(v);
            if v >= max {
                break 'outer;
            }
        }
        decade *= 10;
    }
    t
}

/// A tick's label: ms below a second, seconds above (so a long tail's labels do not run
/// into each other).
fn tick_label(ms: i64) -> String {
    if ms >= 1000 {
        format!("{} s", ms / 1000)
    } else {
        ms.to_string()
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An SVG document plotting the CDF of `sorted` (lateness in ms, ascending).
pub fn cdf_svg(title: &str, sorted: &[i64]) -> String {
    let n = sorted.len().max(1) as f64;
    let max = sorted.last().copied().unwrap_or(0).max(1);
    let ticks = ticks(max);
    let x_max = (1.0 + *ticks.last().expect("non-empty") as f64).log10();
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let x = |ms: i64| LEFT + (1.0 + ms.max(0) as f64).log10() / x_max * plot_w;
    let y = |share: f64| TOP + (1.0 - share) * plot_h;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        esc(title)
    );
    // Grid and axes.
    for &t in &ticks {
        let px = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#ddd"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 16.0,
            tick_label(t)
        );
    }
    for i in 0..=10 {
        let share = i as f64 / 10.0;
        let py = y(share);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}%</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            py + 4.0,
            i * 10
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">lateness: claimed_at − scheduled_at, ms by Redis's clock (log scale)</text>"#,
        LEFT + plot_w / 2.0,
        H - 16.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">firings claimed within x</text>"#,
        TOP + plot_h / 2.0
    );
    // The CDF as a step line: a vertical step at each distinct value, merged with the next
    // while they fall on the same pixel column (a long tail has many values, few columns).
    let mut points = format!(
        "{:.1},{:.1}",
        x(sorted.first().copied().unwrap_or(0)),
        y(0.0)
    );
    let mut i = 0;
    while i < sorted.len() {
        let px = x(sorted[i]);
        let before = i as f64 / n;
        while i < sorted.len() && x(sorted[i]) - px < 1.0 {
            i += 1;
        }
        let after = i as f64 / n;
        let _ = write!(points, " {px:.1},{:.1} {px:.1},{:.1}", y(before), y(after));
    }
    let _ = writeln!(
        s,
        r##"<polyline points="{points}" fill="none" stroke="#1f6feb" stroke-width="2"/>"##
    );
    // Percentile markers.
    if let Some(p) = Percentiles::of(sorted) {
        for (i, (label, v)) in [
            ("p50", p.p50),
            ("p90", p.p90),
            ("p99", p.p99),
            ("max", p.max),
        ]
        .into_iter()
        .enumerate()
        {
            let px = x(v);
            // Near the right edge the label goes to the left of its line.
            let (tx, anchor) = if px > LEFT + 0.8 * plot_w {
                (px - 4.0, "end")
            } else {
                (px + 4.0, "start")
            };
            let _ = writeln!(
                s,
                r##"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" stroke="#d1242f" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{:.1}" text-anchor="{anchor}" fill="#d1242f">{label} {v} ms</text>"##,
                TOP + plot_h,
                TOP + plot_h - 8.0 - 16.0 * i as f64
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_reach_the_max() {
        assert_eq!(ticks(1), vec![0, 1]);
        assert_eq!(ticks(7), vec![0, 1, 2, 5, 10]);
        assert_eq!(*ticks(2300).last().unwrap(), 5000);
        assert_eq!(tick_label(500), "500");
        assert_eq!(tick_label(20_000), "20 s");
    }

    #[test]
    fn svg_is_one_document_with_the_markers() {
        let svg = cdf_svg("t <1>", &[0, 1, 1, 2, 3, 40]);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("t &lt;1&gt;"));
        assert!(svg.contains("p99 40 ms"));
        assert_eq!(svg.matches("<polyline").count(), 1);
    }

    #[test]
    fn a_long_tail_stays_small() {
        let v: Vec<i64> = (0..100_000).collect();
        let svg = cdf_svg("tail", &v);
        assert!(svg.len() < 60_000, "{} bytes", svg.len());
    }
}
