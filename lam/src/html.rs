//! `lam replay --html FILE`: one self-contained page (no network: styles,
//! charts and the cited outputs' originals are in the file) drawn from the
//! same JSON `--json` prints, so every figure on it is one of `--json`'s.
//!
//! Each figure the page shows carries its value and where `--json` has it
//! (`data-k="total.usd_lam"`, `data-v`), so a reader (the browser test,
//! `lam/tests/html_browser.py`) can check the page against `--json`.

use serde_json::Value;
use std::fmt::Write as _;

/// An archived output the page embeds: its `§id` and exact bytes.
pub struct Original {
    pub id: String,
    pub bytes: Vec<u8>,
}

/// The originals of `ids` (each once) from the proxy's archive; an id it
/// cannot answer is left out (the page then says so beside its link).
pub fn originals<'a>(proxy: &lam_serve::Proxy, ids: impl Iterator<Item = &'a String>) -> Vec<Original> {
    let mut seen = std::collections::HashSet::new();
    ids.filter(|id| seen.insert(id.as_str())).filter_map(|id| proxy.recall(id).ok().map(|bytes| Original { id: id.clone(), bytes })).collect()
}

/// The page for `report` (`lam replay --json`'s object) with `originals`.
pub fn page(report: &Value, originals: &[Original]) -> String {
    let sessions = report["sessions"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut h = String::with_capacity(64 << 10);
    let title = format!("lam replay: {} session(s)", sessions.len());
    let _ = write!(h, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ =
        write!(h, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{}</title><style>{CSS}</style></head><body>", esc(&title));
    summary(&mut h, report);
    for (i, s) in sessions.iter().enumerate() {
        session(&mut h, i, s, originals);
    }
    originals_section(&mut h, originals);
    let _ = writeln!(h, "<script>{SCRIPT}</script></body></html>");
    h
}

const CSS: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1em 1.5em;color:#222}\
h1{font-size:1.5em;margin:.3em 0}h2{font-size:1.15em;margin:1.2em 0 .3em;overflow-wrap:anywhere}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:right}\
td:first-child,th:first-child{text-align:left}.calls td:first-child{font-family:monospace;font-size:12px;max-width:640px;overflow-wrap:anywhere}\
svg{width:100%;height:auto;background:#fafafa;border:1px solid #eee}.legend span{margin-right:1.2em}\
.sw{display:inline-block;width:1.4em;height:.25em;vertical-align:middle;margin-right:.3em}\
.ok{color:#17663a}.bad{color:#b00020;font-weight:bold}pre{white-space:pre-wrap;font-size:12px;background:#f6f6f6;padding:.6em;max-height:30em;overflow:auto}\
details{margin:.2em 0}details:target{outline:2px solid #1f6feb}article{break-inside:avoid-page}\
@media print{body{max-width:none}pre{max-height:none}}";

/// Opens the original a link names (and the one the address names on load).
const SCRIPT: &str = "function openHash(){var e=document.getElementById(decodeURIComponent(location.hash.slice(1)));\
if(e&&e.tagName==='DETAILS'){e.open=true;e.scrollIntoView();}}window.addEventListener('hashchange',openHash);openHash();";

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A figure: `shown`, carrying its `--json` place `key` and exact value.
fn fig(key: &str, v: &Value, shown: String) -> String {
    format!("<span data-k=\"{}\" data-v=\"{}\">{}</span>", esc(key), esc(&v.to_string()), esc(&shown))
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn usd(x: f64) -> String {
    if x < 10.0 { format!("${x:.3}") } else { format!("${x:.2}") }
}

/// The run's totals: the bill both ways, with and without recalls, and the checks.
fn summary(h: &mut String, r: &Value) {
    let t = &r["total"];
    let k = |name: &str| format!("total.{name}");
    let f = |name: &str, shown: String| fig(&k(name), &t[name], shown);
    let _ = write!(
        h,
        "<header><h1>What lam saved</h1><p>{} requests in {} session(s); budget {}; dollars at the prices of {} (each request at its model's).</p></header>",
        f("requests", t["requests"].to_string()),
        r["sessions"].as_array().map_or(0, Vec::len),
        esc(r["budget"]["mode"].as_str().unwrap_or("?")),
        esc(r["prices"]["date"].as_str().unwrap_or("?"))
    );
    let _ = write!(h, "<section id=\"summary\"><table><tr><th></th><th>direct</th><th>through lam</th><th>ratio</th></tr>");
    let _ = write!(
        h,
        "<tr><td>dollars, with the recalls of cited outputs</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        f("usd_direct", usd(num(&t["usd_direct"]))),
        f("usd_lam_with_recalls", usd(num(&t["usd_lam_with_recalls"]))),
        f("usd_ratio_with_recalls", format!("{:.3}x", num(&t["usd_ratio_with_recalls"])))
    );
    let _ = write!(
        h,
        "<tr><td>dollars, without them</td><td></td><td>{}</td><td>{}</td></tr>",
        f("usd_lam", usd(num(&t["usd_lam"]))),
        f("usd_ratio", format!("{:.3}x", num(&t["usd_ratio"])))
    );
    let _ = write!(
        h,
        "<tr><td>billed input units (plain-input tokens at cache prices)</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        f("billed_direct", format!("{:.0}", num(&t["billed_direct"]))),
        f("billed_lam", format!("{:.0}", num(&t["billed_lam"]))),
        f("billed_ratio", format!("{:.3}x", num(&t["billed_ratio"])))
    );
    let _ = write!(
        h,
        "<p>Tool-result tokens: {} sent, {} forwarded at first sight. Cuts: {} cold, {} warm; {} results cited. Recalls priced: {} ({}), one per cited output the agent later quoted: an estimate, since an agent may use an output without quoting it, or quote one it did not need.</p>",
        f("tool_tokens_in", t["tool_tokens_in"].to_string()),
        f("tool_tokens_out", t["tool_tokens_out"].to_string()),
        f("cuts_cold", t["cuts_cold"].to_string()),
        f("cuts_warm", t["cuts_warm"].to_string()),
        f("citations", t["citations"].to_string()),
        f("recalls", t["recalls"].to_string()),
        f("usd_recalls", usd(num(&t["usd_recalls"])))
    );
    checks(h, t);
    for n in t["price_notes"].as_array().into_iter().flatten() {
        let _ = write!(h, "<p>note: {}</p>", esc(n.as_str().unwrap_or_default()));
    }
    let _ = write!(h, "</section>");
}

/// The checks: 0 new lines hidden and every cited id recalled exactly,
/// always; 0 earlier bytes changed without cuts (a cut re-writes the items
/// after it, counted here as `lam replay`'s `chg` counts them).
fn checks(h: &mut String, t: &Value) {
    let cut = t["cuts"].as_u64().unwrap_or(0) > 0;
    let changed = match cut {
        true => "earlier items re-written at cuts (a cut re-writes the cached prefix after it)",
        false => "earlier bytes changed",
    };
    let _ = write!(h, "<p>Checks: ");
    for (name, what) in [("earlier_changed", changed), ("new_lines_hidden", "new lines hidden"), ("cited_recall_wrong", "cited ids not recalled exactly")] {
        let class = match t[name].as_u64() {
            Some(0) => "ok",
            _ if cut && name == "earlier_changed" => "",
            _ => "bad",
        };
        let _ = write!(h, "<span class=\"{class}\">{} {what}</span>; ", fig(&format!("total.{name}"), &t[name], t[name].to_string()));
    }
    let _ = write!(h, "{} cited ids recalled from the archive.</p>", fig("total.cited_recalled", &t["cited_recalled"], t["cited_recalled"].to_string()));
}

/// One session: its figures, its two charts and the calls it saved most on.
fn session(h: &mut String, i: usize, s: &Value, originals: &[Original]) {
    let k = |name: &str| format!("sessions.{i}.{name}");
    let f = |name: &str, shown: String| fig(&k(name), &s[name], shown);
    let _ = write!(
        h,
        "<article class=\"session\" data-session=\"{}\"><h2>{} <small>({})</small></h2>",
        esc(s["session"].as_str().unwrap_or_default()),
        esc(s["session"].as_str().unwrap_or_default()),
        esc(s["shape"].as_str().unwrap_or_default())
    );
    let _ = write!(
        h,
        "<p>{} requests; {} direct, {} through lam ({}), {} with recalls; peak prompt {} tokens through lam; {} cuts.</p>",
        f("requests", s["requests"].to_string()),
        f("usd_direct", usd(num(&s["usd_direct"]))),
        f("usd_lam", usd(num(&s["usd_lam"]))),
        f("usd_ratio", format!("{:.3}x", num(&s["usd_ratio"]))),
        f("usd_lam_with_recalls", usd(num(&s["usd_lam_with_recalls"]))),
        f("peak_tokens", s["peak_tokens"].to_string()),
        f("cuts", s["cuts"].to_string())
    );
    let rows = s["per_request"].as_array().map(Vec::as_slice).unwrap_or_default();
    context_chart(h, rows);
    bill_chart(h, rows);
    top_calls(h, s["top_calls"].as_array().map(Vec::as_slice).unwrap_or_default(), originals);
    let _ = write!(h, "</article>");
}

const W: f64 = 900.0;
const H: f64 = 240.0;
const PAD: f64 = 48.0;

/// Where request `i` of `n`, `y` of `top`, lies on a chart.
fn xy(i: usize, n: usize, y: f64, top: f64) -> (f64, f64) {
    let x = PAD + (W - 2.0 * PAD) * if n > 1 { i as f64 / (n - 1) as f64 } else { 0.5 };
    (x, H - PAD / 2.0 - (H - PAD) * if top > 0.0 { y / top } else { 0.0 })
}

fn line(ys: &[f64], top: f64, color: &str, dash: &str) -> String {
    let pts: Vec<String> = ys.iter().enumerate().map(|(i, y)| xy(i, ys.len(), *y, top)).map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    format!("<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.6\" stroke-dasharray=\"{dash}\" points=\"{}\"/>", pts.join(" "))
}

fn axis(h: &mut String, top: f64, unit: &dyn Fn(f64) -> String, n: usize) {
    for frac in [0.0, 0.5, 1.0] {
        let (_, y) = xy(0, 2, top * frac, top);
        let _ = write!(
            h,
            "<line x1=\"{PAD}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            W - PAD,
            PAD - 4.0,
            y + 4.0,
            esc(&unit(top * frac))
        );
    }
    let _ = write!(h, "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">request {n}</text>", W - PAD, H - 4.0);
}

/// Input tokens per request, direct and through lam, the budget, each cut and each cache expiry.
fn context_chart(h: &mut String, rows: &[Value]) {
    let get = |k: &str| rows.iter().map(|r| num(&r[k])).collect::<Vec<f64>>();
    let (direct, lam) = (get("direct_tokens"), get("lam_tokens"));
    let budget: Vec<f64> = rows.iter().filter_map(|r| r["budget"].as_f64()).collect();
    let top = direct.iter().chain(&lam).chain(&budget).fold(1.0f64, |a, b| a.max(*b));
    let _ = write!(h, "<svg class=\"context\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"input tokens per request\">");
    for (i, _) in rows.iter().enumerate().filter(|(_, r)| r["cold"].as_bool() == Some(true)) {
        let (x, _) = xy(i, rows.len(), 0.0, top);
        let _ = write!(
            h,
            "<rect class=\"cold\" x=\"{:.1}\" y=\"{}\" width=\"3\" height=\"{}\" fill=\"#f5c16c\"><title>request {i}: the prompt cache had expired</title></rect>",
            x - 1.5,
            PAD / 2.0,
            H - PAD
        );
    }
    axis(h, top, &|v| format!("{:.0}k", v / 1000.0), rows.len());
    let _ = write!(h, "{}{}", line(&direct, top, "#8a8f98", ""), line(&lam, top, "#1f6feb", ""));
    if budget.len() == rows.len() && !budget.is_empty() {
        let _ = write!(h, "{}", line(&budget, top, "#b00020", "5 4"));
    }
    for (i, r) in rows.iter().enumerate().filter(|(_, r)| r["cuts"].as_u64().unwrap_or(0) > 0) {
        let (x, y) = xy(i, rows.len(), num(&r["lam_tokens"]), top);
        let _ = write!(
            h,
            "<path class=\"cut\" d=\"M{x:.1},{:.1}l-5,-9h10z\" fill=\"#b00020\"><title>request {i}: cut to {} tokens</title></path>",
            y - 2.0,
            r["lam_tokens"]
        );
    }
    let _ = write!(
        h,
        "</svg><p class=\"legend\"><span><i class=\"sw\" style=\"background:#8a8f98\"></i>input tokens direct</span><span><i class=\"sw\" style=\"background:#1f6feb\"></i>through lam</span><span><i class=\"sw\" style=\"background:#b00020\"></i>budget (dashed), cuts (triangles)</span><span><i class=\"sw\" style=\"background:#f5c16c\"></i>cache expired</span></p>"
    );
}

/// The bill so far, in dollars, direct and through lam.
fn bill_chart(h: &mut String, rows: &[Value]) {
    let cumulative = |k: &str| {
        rows.iter()
            .scan(0.0, |a, r| {
                Some({
                    *a += num(&r[k]);
                    *a
                })
            })
            .collect::<Vec<f64>>()
    };
    let (direct, lam) = (cumulative("direct_usd"), cumulative("lam_usd"));
    let top = direct.iter().chain(&lam).fold(1e-9f64, |a, b| a.max(*b));
    let _ = write!(h, "<svg class=\"bill\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"the bill so far in dollars\">");
    axis(h, top, &|v| usd(v), rows.len());
    let _ = write!(h, "{}{}</svg>", line(&direct, top, "#8a8f98", ""), line(&lam, top, "#1f6feb", ""));
    let _ = write!(
        h,
        "<p class=\"legend\"><span><i class=\"sw\" style=\"background:#8a8f98\"></i>the bill so far direct</span><span><i class=\"sw\" style=\"background:#1f6feb\"></i>through lam (recalls not included)</span></p>"
    );
}

/// The calls whose outputs lam kept out most, each `§id` linked to its original.
fn top_calls(h: &mut String, calls: &[Value], originals: &[Original]) {
    if calls.is_empty() {
        return;
    }
    let _ = write!(h, "<table class=\"calls\"><tr><th>where the savings came from: call</th><th>output tokens</th><th>kept out</th><th>how</th></tr>");
    for c in calls {
        let how = match c["id"].as_str() {
            Some(id) if originals.iter().any(|o| o.id == id) => {
                format!("{} <a href=\"#obs-{id}\">§{id}</a>", if c["cited"] == true { "cited" } else { "stub of" })
            }
            Some(id) => format!("§{} (not in the archive)", esc(id)),
            None => "stubbed lines".to_string(),
        };
        let _ =
            write!(h, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{how}</td></tr>", esc(c["action"].as_str().unwrap_or_default()), c["tokens"], c["kept_out"]);
    }
    let _ = write!(h, "</table>");
}

/// Every original the page names, exactly as archived (UTF-8 shown as text).
fn originals_section(h: &mut String, originals: &[Original]) {
    let _ = write!(
        h,
        "<section id=\"originals\"><h2>Originals ({})</h2><p>Each stub and citation names an output by its <code>§id</code>; here is each one as the archive holds it (what <code>lam recall</code> prints).</p>",
        originals.len()
    );
    for o in originals {
        let text = String::from_utf8_lossy(&o.bytes);
        let _ = write!(h, "<details id=\"obs-{id}\"><summary>§{id} ({} bytes)</summary><pre>{}</pre></details>", o.bytes.len(), esc(&text), id = esc(&o.id));
    }
    let _ = write!(h, "</section>");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every figure carries its `--json` value; text is escaped; an original is linked and embedded.
    #[test]
    fn a_page_carries_the_json_s_figures_and_the_originals() {
        let row = serde_json::json!({"direct_tokens": 100, "lam_tokens": 80, "direct_usd": 0.01, "lam_usd": 0.008, "cold": true, "cuts": 1, "budget": 90});
        let r = serde_json::json!({
            "budget": {"mode": "given"}, "prices": {"date": "2026-12-07"},
            "total": {"requests": 2, "usd_direct": 0.02, "usd_lam_with_recalls": 0.017, "earlier_changed": 0},
            "sessions": [{"session": "s<1>", "shape": "codex", "requests": 2, "per_request": [row.clone(), row],
                "top_calls": [{"action": "cat a.py", "tokens": 40, "kept_out": 30, "cited": true, "id": "9f3a"}]}],
        });
        let page = page(&r, &[Original { id: "9f3a".into(), bytes: b"x < y & z\n".to_vec() }]);
        assert!(page.contains("data-k=\"total.usd_direct\" data-v=\"0.02\""), "{page}");
        assert!(page.contains("s&lt;1&gt;") && !page.contains("s<1>"));
        assert!(page.contains("href=\"#obs-9f3a\"") && page.contains("<details id=\"obs-9f3a\">"));
        assert!(page.contains("<pre>x &lt; y &amp; z\n</pre>"));
        assert!(page.contains("class=\"cut\"") && page.contains("class=\"cold\""));
        assert!(!page.contains("http://") && !page.contains("https://"), "nothing from the network");
    }
}
