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
    mag * if f < 1.5 { 1.0 } else if f < 3.5 { 2.0 } else if f < 7.5 { 5.0 } else { 10.0 }
}

impl Chart {
    /// Render to an SVG document.
    pub fn render(&self) -> String {
        let (w, h) = (860.0, 560.0);
        let (ml, mr, mt, mb) = (80.0, 230.0, 50.0, 60.0);
        let tx = |x: f64| if self.log2_x { x.max(1e-12).log2() } else { x };
        let xmax = self.xmax.unwrap_or(f64::INFINITY);
        let pts = self.series.iter().flat_map(|s| s.points.iter()).filter(|p| p.x <= xmax);
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
        for p in pts {
            if !p.x.is_finite() || !p.y.is_finite() {
                continue;
            }
            x0 = x0.min(tx(p.x));
            x1 = x1.max(tx(p.x));
            let (lo, hi) = p.yerr.unwrap_or((p.y, p.y));
            y0 = y0.min(p.y.min(lo));
            y1 = y1.max(p.y.max(hi));
        }
        if !x0.is_finite() {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if x1 - x0 < 1e-9 {
            x0 -= 0.5;
            x1 += 0.5;
        }
        if y1 - y0 < 1e-9 {
            y0 -= 0.5;
            y1 += 0.5;
        }
        let (px, py) = ((x1 - x0) * 0.05, (y1 - y0) * 0.08);
        let (x0, x1, y0, y1) = (x0 - px, x1 + px, (y0 - py).min(0.0f64.max(y0 - py)), y1 + py);
        let (pw, ph) = (w - ml - mr, h - mt - mb);
        let sx = |x: f64| ml + (tx(x) - x0) / (x1 - x0) * pw;
        let sxt = |t: f64| ml + (t - x0) / (x1 - x0) * pw;
        let sy = |y: f64| mt + ph - (y - y0) / (y1 - y0) * ph;
        let mut s = String::new();
        let _ = writeln!(s, r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#);
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(s, r#"<text x="{}" y="28" font-size="16" text-anchor="middle">{}</text>"#, ml + pw / 2.0, esc(&self.title));
        // Grid and ticks.
        let ystep = nice_step(y1 - y0);
        let mut y = (y0 / ystep).ceil() * ystep;
        while y <= y1 + 1e-12 {
            let yy = sy(y);
            let _ = writeln!(s, r##"<line x1="{ml}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##, ml + pw, ml - 6.0, yy + 4.0, fmt_tick(y));
            y += ystep;
        }
        if self.log2_x {
            let mut t = x0.ceil();
            while t <= x1 + 1e-12 {
                let xx = sxt(t);
                let v = 2f64.powf(t);
                let label = if v >= 1000.0 { format!("{:.0}K", v / 1000.0) } else { format!("{v:.0}") };
                let _ = writeln!(s, r##"<line x1="{xx:.1}" y1="{mt}" x2="{xx:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##, mt + ph, mt + ph + 18.0);
                t += 1.0;
            }
        } else {
            let xstep = nice_step(x1 - x0);
            let mut x = (x0 / xstep).ceil() * xstep;
            while x <= x1 + 1e-12 {
                let xx = sxt(x);
                let _ = writeln!(s, r##"<line x1="{xx:.1}" y1="{mt}" x2="{xx:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##, mt + ph, mt + ph + 18.0, fmt_tick(x));
                x += xstep;
            }
        }
        let _ = writeln!(s, r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##);
        let _ = writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, ml + pw / 2.0, h - 15.0, esc(&self.xlabel));
        let _ = writeln!(s, r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">{}</text>"#, mt + ph / 2.0, mt + ph / 2.0, esc(&self.ylabel));
        // Series.
        for (k, se) in self.series.iter().enumerate() {
            let pts: Vec<&Point> = se.points.iter().filter(|p| p.x.is_finite() && p.y.is_finite() && p.x <= xmax).collect();
            if se.line && pts.len() > 1 {
                let d: Vec<String> = pts.iter().map(|p| format!("{:.1},{:.1}", sx(p.x), sy(p.y))).collect();
                let _ = writeln!(s, r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="1.5"/>"#, d.join(" "), se.color);
            }
            for p in &pts {
                let (cx, cy) = (sx(p.x), sy(p.y));
                if let Some((lo, hi)) = p.yerr {
                    let _ = writeln!(s, r#"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="{}"/>"#, sy(lo), sy(hi), se.color);
                }
                let _ = writeln!(s, r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="4" fill="{}"><title>{}: {} ({:.4}, {:.4})</title></circle>"#, se.color, esc(&se.name), esc(&p.label), p.x, p.y);
                if !p.label.is_empty() {
                    let _ = writeln!(s, r#"<text x="{:.1}" y="{:.1}" font-size="10" fill="{}">{}</text>"#, cx + 6.0, cy - 5.0, se.color, esc(&p.label));
                }
            }
            let ly = mt + 10.0 + 20.0 * k as f64;
            let lx = ml + pw + 15.0;
            let _ = writeln!(s, r#"<circle cx="{lx}" cy="{ly}" r="5" fill="{}"/><text x="{}" y="{}">{}</text>"#, se.color, lx + 12.0, ly + 4.0, esc(&se.name));
        }
        s.push_str("</svg>\n");
        s
    }
}

fn fmt_tick(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0 + 0.0;
    if r == r.trunc() { format!("{r:.0}") } else { format!("{r}") }
}
