//! Small hand-written SVG charts (no dependencies): a scatter with labelled
//! series and optional error bars, and line charts on a log2 x axis.

use std::fmt::Write as _;

/// One point of a series.
#[derive(Debug, Clone)]
pub struct Point {
    /// x value.
    pub x: f64,
    /// y value.
    pub y: f64,
    /// Label drawn next to the marker.
    pub label: String,
    /// Vertical error bar (low, high), if any.
    pub yerr: Option<(f64, f64)>,
}

/// A named series.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Colour (CSS).
    pub color: &'static str,
    /// Connect points with a line.
    pub line: bool,
    /// Points.
    pub points: Vec<Point>,
}

/// A chart description.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// x axis label.
    pub xlabel: String,
    /// y axis label.
    pub ylabel: String,
    /// log2 x axis.
    pub log2_x: bool,
    /// Series.
    pub series: Vec<Series>,
    /// Draw only points with x at most this.
    pub xmax: Option<f64>,
}

/// Colours used by the report.
pub const COLORS: [&str; 8] = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn nice_step(range: f64) -> f64 {
    let raw = range / 6.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    }
}

/// An axis range for data in `[lo, hi]`, padded by `pad` of the span on
/// each side. Equal values get `[v - 1, v + 1]`; a lower end is never
/// negative when the data is not (so all zeros give `[0, 1]`); no data
/// gives `[0, 1]`.
pub fn axis_range(lo: f64, hi: f64, pad: f64) -> (f64, f64) {
    if !lo.is_finite() || !hi.is_finite() || lo > hi {
        return (0.0, 1.0);
    }
    let (a, b) = if hi - lo < 1e-9 { (lo - 1.0, hi + 1.0) } else { (lo - pad * (hi - lo), hi + pad * (hi - lo)) };
    (if lo >= 0.0 { a.max(0.0) } else { a }, b)
}

/// Width (px) of a label of `text` at font size 10.
fn label_width(text: &str) -> f64 {
    6.0 * text.chars().count() as f64
}

/// Positions of labels beside markers: `at` holds each marker's screen
/// position and its label's width. A label goes right of and above its
/// marker; when that box comes within `gap` px of a label already placed,
/// it is staggered below, higher or lower in steps of one line; when no
/// spot is free it is dropped (`None`: the caller lists its value in the
/// legend). Labels are placed in order, so the first of a cluster keeps
/// the default spot.
pub fn place_labels(at: &[(f64, f64, f64)], gap: f64) -> Vec<Option<(f64, f64)>> {
    const H: f64 = 10.0;
    let offsets = [(6.0, -5.0), (6.0, 12.0), (6.0, -17.0), (6.0, 24.0), (6.0, -29.0)];
    let mut boxes: Vec<(f64, f64, f64, f64)> = Vec::new();
    let clear = |b: &(f64, f64, f64, f64), boxes: &[(f64, f64, f64, f64)]| {
        boxes.iter().all(|o| b.0 >= o.2 + gap || o.0 >= b.2 + gap || b.1 >= o.3 + gap || o.1 >= b.3 + gap)
    };
    at.iter()
        .map(|&(x, y, w)| {
            let spot = offsets.iter().map(|&(dx, dy)| (x + dx, y + dy)).find(|&(lx, ly)| clear(&(lx, ly - H, lx + w, ly), &boxes))?;
            boxes.push((spot.0, spot.1 - H, spot.0 + w, spot.1));
            Some(spot)
        })
        .collect()
}

/// Screen mapping of a chart's data.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    log2_x: bool,
    xmax: f64,
}

const W: f64 = 860.0;
const H: f64 = 560.0;
const ML: f64 = 80.0;
const MR: f64 = 230.0;
const MT: f64 = 50.0;
const MB: f64 = 60.0;
const PW: f64 = W - ML - MR;
const PH: f64 = H - MT - MB;

impl Frame {
    fn tx(&self, x: f64) -> f64 {
        if self.log2_x { x.max(1e-12).log2() } else { x }
    }
    /// Screen x of an axis coordinate (log2 already applied).
    fn sxt(&self, t: f64) -> f64 {
        ML + (t - self.x0) / (self.x1 - self.x0) * PW
    }
    fn sx(&self, x: f64) -> f64 {
        self.sxt(self.tx(x))
    }
    fn sy(&self, y: f64) -> f64 {
        MT + PH - (y - self.y0) / (self.y1 - self.y0) * PH
    }
    fn shown(&self, p: &Point) -> bool {
        p.x.is_finite() && p.y.is_finite() && p.x <= self.xmax
    }
}

impl Chart {
    /// The axes' ranges: the data (error bars included) with a margin.
    fn frame(&self) -> Frame {
        let mut f = Frame { x0: 0.0, x1: 0.0, y0: 0.0, y1: 0.0, log2_x: self.log2_x, xmax: self.xmax.unwrap_or(f64::INFINITY) };
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
        for p in self.series.iter().flat_map(|s| s.points.iter()).filter(|p| f.shown(p)) {
            x0 = x0.min(f.tx(p.x));
            x1 = x1.max(f.tx(p.x));
            let (lo, hi) = p.yerr.unwrap_or((p.y, p.y));
            y0 = y0.min(p.y.min(lo));
            y1 = y1.max(p.y.max(hi));
        }
        (f.x0, f.x1) = axis_range(x0, x1, 0.05);
        (f.y0, f.y1) = axis_range(y0, y1, 0.08);
        f
    }

    /// Render to an SVG document.
    pub fn render(&self) -> String {
        let f = self.frame();
        let mut s = String::new();
        let _ =
            writeln!(s, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#);
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(s, r#"<text x="{}" y="28" font-size="16" text-anchor="middle">{}</text>"#, ML + PW / 2.0, esc(&self.title));
        self.grid(&mut s, &f);
        let dropped = self.draw_series(&mut s, &f);
        self.legend(&mut s, &dropped);
        s.push_str("</svg>\n");
        s
    }

    /// Grid lines, ticks, the plot box and the axis labels.
    fn grid(&self, s: &mut String, f: &Frame) {
        let ystep = nice_step(f.y1 - f.y0);
        let mut y = (f.y0 / ystep).ceil() * ystep;
        while y <= f.y1 + 1e-12 {
            let yy = f.sy(y);
            let _ = writeln!(
                s,
                r##"<line x1="{ML}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                ML + PW,
                ML - 6.0,
                yy + 4.0,
                fmt_tick(y)
            );
            y += ystep;
        }
        let (mut t, step) = if self.log2_x {
            (f.x0.ceil(), 1.0)
        } else {
            let st = nice_step(f.x1 - f.x0);
            ((f.x0 / st).ceil() * st, st)
        };
        while t <= f.x1 + 1e-12 {
            let xx = f.sxt(t);
            let label = if self.log2_x { log2_tick(t) } else { fmt_tick(t) };
            let _ = writeln!(
                s,
                r##"<line x1="{xx:.1}" y1="{MT}" x2="{xx:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
                MT + PH,
                MT + PH + 18.0
            );
            t += step;
        }
        let _ = writeln!(s, r##"<rect x="{ML}" y="{MT}" width="{PW}" height="{PH}" fill="none" stroke="#333"/>"##);
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, ML + PW / 2.0, H - 15.0, esc(&self.xlabel));
        let _ =
            writeln!(s, r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">{}</text>"#, MT + PH / 2.0, MT + PH / 2.0, esc(&self.ylabel));
    }

    /// Lines, markers, error bars and the labels that fit; returns the
    /// labels left out (`series, label, x, y`) for the legend.
    fn draw_series(&self, s: &mut String, f: &Frame) -> Vec<(usize, String, f64, f64)> {
        let mut labels = Vec::new();
        for (k, se) in self.series.iter().enumerate() {
            let pts: Vec<&Point> = se.points.iter().filter(|p| f.shown(p)).collect();
            if se.line && pts.len() > 1 {
                let d: Vec<String> = pts.iter().map(|p| format!("{:.1},{:.1}", f.sx(p.x), f.sy(p.y))).collect();
                let _ = writeln!(s, r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/>"#, d.join(" "), se.color);
            }
            for p in &pts {
                let (cx, cy) = (f.sx(p.x), f.sy(p.y));
                if let Some((lo, hi)) = p.yerr {
                    let _ = writeln!(s, r#"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="{}"/>"#, f.sy(lo), f.sy(hi), se.color);
                }
                let _ = writeln!(
                    s,
                    r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="4" fill="{}"><title>{}: {} ({:.4}, {:.4})</title></circle>"#,
                    se.color,
                    esc(&se.name),
                    esc(&p.label),
                    p.x,
                    p.y
                );
                if !p.label.is_empty() {
                    labels.push((k, *p, cx, cy));
                }
            }
        }
        let at: Vec<(f64, f64, f64)> = labels.iter().map(|l| (l.2, l.3, label_width(&l.1.label))).collect();
        let mut dropped = Vec::new();
        for (l, spot) in labels.iter().zip(place_labels(&at, 2.0)) {
            match spot {
                Some((x, y)) => {
                    let _ = writeln!(s, r#"<text x="{x:.1}" y="{y:.1}" font-size="10" fill="{}">{}</text>"#, self.series[l.0].color, esc(&l.1.label));
                }
                None => dropped.push((l.0, l.1.label.clone(), l.1.x, l.1.y)),
            }
        }
        dropped
    }

    /// One legend line per series, then the values of labels left out.
    fn legend(&self, s: &mut String, dropped: &[(usize, String, f64, f64)]) {
        let lx = ML + PW + 15.0;
        for (k, se) in self.series.iter().enumerate() {
            let ly = MT + 10.0 + 20.0 * k as f64;
            let _ = writeln!(s, r#"<circle cx="{lx}" cy="{ly}" r="5" fill="{}"/><text x="{}" y="{}">{}</text>"#, se.color, lx + 12.0, ly + 4.0, esc(&se.name));
        }
        let mut ly = MT + 20.0 * self.series.len() as f64 + 20.0;
        if !dropped.is_empty() {
            let _ = writeln!(s, r#"<text x="{lx}" y="{ly}" font-size="10">labels too close to draw (x, y):</text>"#);
        }
        for (k, label, x, y) in dropped {
            ly += 13.0;
            let _ = writeln!(
                s,
                r#"<text x="{lx}" y="{ly}" font-size="10" fill="{}">{}: {}, {}</text>"#,
                self.series[*k].color,
                esc(label),
                fmt_tick(*x),
                fmt_tick(*y)
            );
        }
    }
}

fn log2_tick(t: f64) -> String {
    let v = 2f64.powf(t);
    if v >= 1000.0 { format!("{:.0}K", v / 1000.0) } else { format!("{v:.0}") }
}

fn fmt_tick(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0 + 0.0;
    if r == r.trunc() { format!("{r:.0}") } else { format!("{r}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_fits_the_data() {
        // All equal: a small range around the value, never below zero for non-negative data.
        assert_eq!(axis_range(0.0, 0.0, 0.08), (0.0, 1.0));
        assert_eq!(axis_range(100.0, 100.0, 0.08), (99.0, 101.0));
        assert_eq!(axis_range(-3.0, -3.0, 0.08), (-4.0, -2.0));
        // Non-negative data: padding stops at zero.
        let (lo, hi) = axis_range(0.0, 40.0, 0.08);
        assert_eq!(lo, 0.0);
        assert!((hi - 43.2).abs() < 1e-9);
        let (lo, hi) = axis_range(30.0, 40.0, 0.1);
        assert!((lo - 29.0).abs() < 1e-9 && (hi - 41.0).abs() < 1e-9);
        // Negative data keeps its padding; no data gives [0, 1].
        assert!(axis_range(-1.0, 1.0, 0.5).0 < -1.0);
        assert_eq!(axis_range(f64::INFINITY, f64::NEG_INFINITY, 0.1), (0.0, 1.0));
    }

    #[test]
    fn close_labels_are_staggered_then_dropped() {
        // Far apart: both at the default spot.
        let p = place_labels(&[(100.0, 100.0, 30.0), (300.0, 300.0, 30.0)], 2.0);
        assert_eq!(p, vec![Some((106.0, 95.0)), Some((306.0, 295.0))]);
        // Six markers within a pixel of each other: the first keeps the default
        // spot, four are staggered (all distinct, none overlapping), the last dropped.
        let at: Vec<(f64, f64, f64)> = (0..6).map(|i| (100.0 + 0.2 * i as f64, 100.0, 36.0)).collect();
        let p = place_labels(&at, 2.0);
        assert_eq!(p[0], Some((106.0, 95.0)));
        let ys: Vec<f64> = p.iter().flatten().map(|q| q.1).collect();
        assert_eq!(ys.len(), 5);
        for (i, a) in ys.iter().enumerate() {
            for b in &ys[i + 1..] {
                assert!((a - b).abs() >= 12.0, "{ys:?}");
            }
        }
        assert_eq!(p[5], None);
    }

    #[test]
    fn equal_values_render_without_a_negative_axis() {
        let pts = (0..3).map(|i| Point { x: 0.0, y: 0.0, label: format!("t=0.9{i}"), yerr: None }).collect();
        let c = Chart {
            title: "t".into(),
            xlabel: "x".into(),
            ylabel: "y".into(),
            log2_x: false,
            series: vec![Series { name: "s".into(), color: COLORS[0], line: true, points: pts }],
            xmax: None,
        };
        let svg = c.render();
        assert!(!svg.contains(">-"), "no negative tick: {svg}");
        // Three labels at one point: all drawn, at different heights.
        let ys: Vec<&str> = svg
            .lines()
            .filter(|l| l.contains(r##"font-size="10" fill="#d62728">t=0.9"##))
            .map(|l| l.split("y=\"").nth(1).unwrap().split('"').next().unwrap())
            .collect();
        assert_eq!(ys.len(), 3, "{svg}");
        assert!(ys[0] != ys[1] && ys[1] != ys[2] && ys[0] != ys[2]);
    }
}
