use super::*;

/// Write `report.json`, `report.md` and the SVG plots into `dir`.
pub fn write_report(r: &EvalReport, dir: &Path) -> Result<Vec<PathBuf>> {
    lam_core::fsdir::create_private(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut put = |name: &str, body: &[u8]| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
        written.push(p);
        Ok(())
    };
    put("report.json", &serde_json::to_vec_pretty(r)?)?;
    put("report.md", markdown(r).as_bytes())?;
    put("removal-vs-evidence.svg", plot_removal_evidence(r).render().as_bytes())?;
    let mut zoom = plot_removal_evidence(r);
    zoom.xmax = Some(2.0);
    zoom.title = format!("{} (evidence lost <= 2%)", zoom.title);
    put("removal-vs-evidence-zoom.svg", zoom.render().as_bytes())?;
    put("removal-vs-size.svg", plot_removal_size(r).render().as_bytes())?;
    Ok(written)
}

/// Figure 3: token removal (y) against evidence lost (x), one marker per setting.
pub fn plot_removal_evidence(r: &EvalReport) -> svg::Chart {
    use svg::{COLORS, Point, Series};
    let pt = |row: &SettingRow, label: String, yerr: Option<(f64, f64)>| Point {
        x: 100.0 * (1.0 - row.evidence_micro.unwrap_or(f64::NAN)),
        y: 100.0 * row.removal_net,
        label,
        yerr,
    };
    let mut series = vec![Series {
        name: "LAM L1->L0 (net)".into(),
        color: COLORS[0],
        line: true,
        points: r.thresholds.iter().map(|t| pt(&t.l1_l0, format!("t={}", t.threshold), None)).collect(),
    }];
    series.push(Series {
        name: "LAM L0->L1 (net)".into(),
        color: COLORS[5],
        line: true,
        points: r.thresholds.iter().map(|t| pt(&t.l0_l1, String::new(), None)).collect(),
    });
    for (i, (fam, name)) in
        [("l0", "L0 alone"), ("masking", "masking (last k)"), ("semdedup-global", "SemDeDup global"), ("semdedup-trajectory", "SemDeDup per trajectory")]
            .iter()
            .enumerate()
    {
        let pts: Vec<Point> = r
            .baselines
            .iter()
            .filter(|b| b.baseline == *fam)
            .map(|b| {
                let label = match (*fam, b.param) {
                    ("masking", Some(k)) => format!("k={k}"),
                    (_, Some(t)) => format!("{t}"),
                    _ => String::new(),
                };
                let yerr = b
                    .seed_removal
                    .as_ref()
                    .map(|v| (100.0 * v.iter().cloned().fold(f64::INFINITY, f64::min), 100.0 * v.iter().cloned().fold(f64::NEG_INFINITY, f64::max)));
                pt(&b.row, label, yerr)
            })
            .collect();
        if !pts.is_empty() {
            series.push(Series { name: name.to_string(), color: COLORS[i + 1], line: *fam != "l0", points: pts });
        }
    }
    svg::Chart {
        title: format!("Token removal vs evidence lost ({} trajectories)", r.trajectories),
        xlabel: "gold-patch evidence lines lost (%, stubs count as lost)".into(),
        ylabel: "observation tokens removed (%, net of stubs)".into(),
        log2_x: false,
        series,
        xmax: None,
    }
}

/// Figure 9b: removal against input size T.
pub fn plot_removal_size(r: &EvalReport) -> svg::Chart {
    use svg::{COLORS, Point, Series};
    let mut series = Vec::new();
    for (i, t) in r.thresholds.iter().enumerate() {
        series.push(Series {
            name: format!("LAM t={}", t.threshold),
            color: svg::COLORS[i % COLORS.len()],
            line: true,
            points: t
                .l1_l0
                .by_size
                .iter()
                .filter_map(|s| {
                    s.removal.map(|x| Point {
                        x: s.size as f64,
                        y: 100.0 * x,
                        label: if i == 0 { format!("n={}", s.trajectories) } else { String::new() },
                        yerr: None,
                    })
                })
                .collect(),
        });
    }
    if let Some(b) = r.baselines.iter().find(|b| b.baseline == "l0") {
        series.push(Series {
            name: "L0 alone".into(),
            color: "#000000",
            line: true,
            points: b
                .row
                .by_size
                .iter()
                .filter_map(|s| s.removal.map(|x| Point { x: s.size as f64, y: 100.0 * x, label: String::new(), yerr: None }))
                .collect(),
        });
    }
    svg::Chart {
        title: "Removal vs input size T (trajectories reaching T)".into(),
        xlabel: "input size T (observation tokens, log scale)".into(),
        ylabel: "tokens removed (%, net)".into(),
        log2_x: true,
        series,
        xmax: None,
    }
}
