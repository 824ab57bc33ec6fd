use super::*;
use lam_core::stub::Recall;

/// The per-trajectory measurement of one setting.
pub(super) struct Scored {
    pub(super) tok_gross: u64,
    pub(super) tok_net: u64,
    pub(super) rec_net: Vec<u32>,
    pub(super) witnessed: u32,
    pub(super) kept: u32,
    pub(super) recovered: u32,
    /// Tokens the stubs cannot do without ([`floor_tokens`]).
    pub(super) tok_floor: u64,
    /// The stub lines' tokens by part ([`part_tokens`]).
    pub(super) tok_parts: [u64; 4],
    /// New lines ([`lam_core::newlines`]), those the residuals hide, and
    /// the hidden lines' tokens.
    pub(super) new_lines: u64,
    pub(super) hidden_lines: u64,
    pub(super) tok_hidden: u64,
    /// Stub lines written.
    pub(super) stub_lines: u64,
}

pub(super) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

/// The tokens no stub design that keeps the guarantees can avoid: per
/// observation that lost anything, its recall handle once (`_recall §id`,
/// as written with `how`; nothing with `Recall::None`), plus each earlier
/// call named as an L1 representative once (`` `CALL` ``). Ids are the
/// session's short ids; brackets, counts, line numbers, L0 sources and
/// newlines are left out, so this is a lower bound on the stub cost.
pub(super) fn floor_tokens(memo: &mut TokMemo, stubs: &[Stub], how: Recall<'_>) -> u64 {
    let mut total = 0u64;
    for own in recall_ids(stubs) {
        if let Recall::Via(name) = how {
            total += memo.count(format!("{name} §{own}").as_bytes()) as u64;
        }
        let mut calls: Vec<&str> = Vec::new();
        for s in stubs.iter().filter(|s| s.id() == own && s.is_chunks()) {
            for c in s.calls() {
                if !calls.contains(&c) {
                    calls.push(c);
                }
            }
        }
        total += calls.iter().map(|c| memo.count(format!(" `{c}`").as_bytes()) as u64).sum::<u64>();
    }
    total
}

/// The stub lines' tokens by part, each line with its newline counted on
/// its own: `[handles, calls, line numbers, rest]`. A part is what the
/// line's count drops by when it goes: first the recall handle, then each
/// call name with its backticks, then the digits; the rest is what remains
/// (`[lam: `, the verbs, `lines`, `of this output`, separators, `]`, the
/// newline). A difference form's hunk headers count as stub lines: their
/// digits are line numbers, the rest (`@@ -`, `,`, ` +`, ` @@`) rest. The parts sum to the lines' own counts, which may differ from
/// the stub cost by a few tokens where a stub joins its neighbours.
pub(super) fn part_tokens(memo: &mut TokMemo, stubs: &[Stub], how: Recall<'_>) -> [u64; 4] {
    let mut parts = [0u64; 4];
    for s in stubs {
        let full = format!("{}\n", s.with(how));
        let mut bare = s.clone();
        bare.set_recall(false);
        let handleless = format!("{}\n", bare.with(how));
        let nameless = s.calls().iter().fold(handleless.clone(), |t, c| t.replacen(&format!("`{c}`"), "``", 1));
        let digitless: String = nameless.chars().filter(|ch| !ch.is_ascii_digit()).collect();
        let counts = [&full, &handleless, &nameless, &digitless].map(|t| u64::from(memo.count(t.as_bytes())));
        for i in 0..3 {
            parts[i] += counts[i].saturating_sub(counts[i + 1]);
        }
        parts[3] += counts[3];
        if let Stub::Delta(d) = s {
            for h in &d.hunks {
                // A hunk header (`@@ -12,2 +12,3 @@`) is a stub line too: its digits and the rest.
                let header = format!("{h}\n");
                let digitless: String = header.chars().filter(|ch| !ch.is_ascii_digit()).collect();
                let [all, rest] = [&header, &digitless].map(|t| u64::from(memo.count(t.as_bytes())));
                parts[2] += all.saturating_sub(rest);
                parts[3] += rest;
            }
        }
    }
    parts
}

/// The `_recall §id` handles of stubs, each once, in order.
pub(super) fn recall_ids(stubs: &[Stub]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for s in stubs {
        if !ids.iter().any(|i| i == s.id()) {
            ids.push(s.id().to_string());
        }
    }
    ids
}

pub(super) fn score(p: &Prep, memo: &mut TokMemo, residuals: &[&[u8]], gross: Option<&[u64]>, stubs: &[Stub], how: Recall<'_>) -> Scored {
    let rec_net: Vec<u32> =
        residuals.iter().zip(&p.traj.records).zip(&p.tok).map(|((r, rec), &t)| if *r == rec.observation.as_slice() { t } else { memo.count(r) }).collect();
    let tok_net: u64 = rec_net.iter().map(|&t| t as u64).sum();
    let tok_gross = gross.map(|g| g.iter().sum()).unwrap_or(tok_net);
    let (mut witnessed, mut kept, mut recovered) = (0, 0, 0);
    if let Some(ev) = &p.evidence {
        let mut recalled: Option<Vec<Vec<u8>>> = None;
        for line in ev {
            witnessed += 1;
            if residuals.iter().any(|r| contains(r, line)) {
                kept += 1;
                recovered += 1;
                continue;
            }
            let bodies = recalled.get_or_insert_with(|| recall_ids(stubs).iter().filter_map(|id| p.store.get(&p.traj.session, id).ok().flatten()).collect());
            if bodies.iter().any(|b| contains(b, line)) {
                recovered += 1;
            }
        }
    }
    let tok_floor = floor_tokens(memo, stubs, how);
    let tok_parts = part_tokens(memo, stubs, how);
    let (new_lines, hidden_lines, tok_hidden) = hidden(p, memo, residuals);
    // A delta's hunk headers are stub lines too.
    let stub_lines = stubs.iter().map(|s| if let Stub::Delta(d) = s { 1 + d.hunks.len() as u64 } else { 1 }).sum();
    Scored { tok_gross, tok_net, rec_net, witnessed, kept, recovered, tok_floor, tok_parts, new_lines, hidden_lines, tok_hidden, stub_lines }
}

/// The trajectory's new lines, those `residuals` hide, and their tokens
/// (each hidden line with its newline).
fn hidden(p: &Prep, memo: &mut TokMemo, residuals: &[&[u8]]) -> (u64, u64, u64) {
    let mut seen = lam_core::newlines::NewLines::new();
    let (mut new, mut lines, mut tok) = (0u64, 0u64, 0u64);
    for (r, rec) in residuals.iter().zip(&p.traj.records) {
        let o = seen.observe(&rec.observation, r);
        new += o.new as u64;
        lines += o.hidden.len() as u64;
        tok += o.hidden.iter().map(|l| u64::from(memo.count(&[l.as_slice(), b"\n"].concat()))).sum::<u64>();
    }
    (new, lines, tok)
}

/// Aggregate of one setting over the corpus.
#[derive(Debug, Clone, Default)]
pub(super) struct Agg {
    pub(super) n: u64,
    pub(super) tok_in: u64,
    pub(super) tok_gross: u64,
    pub(super) tok_net: u64,
    pub(super) tok_floor: u64,
    pub(super) tok_parts: [u64; 4],
    pub(super) new_lines: u64,
    pub(super) hidden_lines: u64,
    pub(super) tok_hidden: u64,
    pub(super) stub_lines: u64,
    pub(super) witnessed: u64,
    pub(super) kept: u64,
    pub(super) recovered: u64,
    pub(super) traj_ev: u64,
    pub(super) intact: u64,
    pub(super) intact_rec: u64,
    pub(super) n_outcome: u64,
    pub(super) resolved: u64,
    pub(super) rsc_hits: u64,
    pub(super) bfr_fit: Vec<u64>,
    pub(super) size_in: Vec<u64>,
    pub(super) size_out: Vec<u64>,
    pub(super) size_n: Vec<u64>,
}

impl Agg {
    pub(super) fn add(&mut self, p: &Prep, s: &Scored, o: &Options) {
        if self.bfr_fit.is_empty() {
            self.bfr_fit = vec![0; o.budgets.len()];
            self.size_in = vec![0; o.sizes.len()];
            self.size_out = vec![0; o.sizes.len()];
            self.size_n = vec![0; o.sizes.len()];
        }
        self.n += 1;
        let tin = p.tok_in();
        self.tok_in += tin;
        self.tok_gross += s.tok_gross;
        self.tok_net += s.tok_net;
        self.tok_floor += s.tok_floor;
        self.tok_parts.iter_mut().zip(s.tok_parts).for_each(|(a, b)| *a += b);
        self.new_lines += s.new_lines;
        self.hidden_lines += s.hidden_lines;
        self.tok_hidden += s.tok_hidden;
        self.stub_lines += s.stub_lines;
        for (i, &b) in o.budgets.iter().enumerate() {
            if s.tok_net <= b as u64 {
                self.bfr_fit[i] += 1;
            }
        }
        for (i, &t) in o.sizes.iter().enumerate() {
            if tin < t as u64 {
                continue;
            }
            // The shortest prefix of records reaching T input tokens.
            let (mut a, mut b) = (0u64, 0u64);
            for (ti, ri) in p.tok.iter().zip(&s.rec_net) {
                a += *ti as u64;
                b += *ri as u64;
                if a >= t as u64 {
                    break;
                }
            }
            self.size_in[i] += a;
            self.size_out[i] += b;
            self.size_n[i] += 1;
        }
        if p.evidence.is_some() {
            self.traj_ev += 1;
            self.witnessed += s.witnessed as u64;
            self.kept += s.kept as u64;
            self.recovered += s.recovered as u64;
            let intact = s.kept == s.witnessed;
            self.intact += intact as u64;
            self.intact_rec += (s.recovered == s.witnessed) as u64;
            if let Some(r) = p.resolved {
                self.n_outcome += 1;
                self.resolved += r as u64;
                self.rsc_hits += (r && intact) as u64;
            }
        }
    }

    pub(super) fn removal(&self, out: u64) -> f64 {
        if self.tok_in == 0 { 0.0 } else { (self.tok_in as f64 - out as f64) / self.tok_in as f64 }
    }

    pub(super) fn row(&self, o: &Options) -> SettingRow {
        let frac = |a: u64, b: u64| if b == 0 { None } else { Some(a as f64 / b as f64) };
        let share = |a: u64| frac(a, self.tok_in).unwrap_or(0.0);
        SettingRow {
            removal_gross: self.removal(self.tok_gross),
            removal_net: self.removal(self.tok_net),
            stub_cost: self.removal(self.tok_gross) - self.removal(self.tok_net),
            stub_floor: share(self.tok_floor),
            stub_lines: self.stub_lines,
            stub_parts: StubParts {
                handles: share(self.tok_parts[0]),
                calls: share(self.tok_parts[1]),
                line_numbers: share(self.tok_parts[2]),
                rest: share(self.tok_parts[3]),
            },
            tokens_in: self.tok_in,
            tokens_out: self.tok_net,
            new_lines: self.new_lines,
            new_lines_hidden: self.hidden_lines,
            new_tokens_hidden: share(self.tok_hidden),
            evidence_micro: frac(self.kept, self.witnessed),
            evidence_recoverable: frac(self.recovered, self.witnessed),
            trajectories_intact: frac(self.intact, self.traj_ev),
            trajectories_intact_recoverable: frac(self.intact_rec, self.traj_ev),
            lines_witnessed: self.witnessed,
            lines_lost: self.witnessed - self.kept,
            lines_lost_recoverable: self.witnessed - self.recovered,
            rsc: frac(self.rsc_hits, self.n_outcome),
            bfr: o.budgets.iter().zip(&self.bfr_fit).map(|(&b, &f)| Bfr { budget: b, fits: f as f64 / self.n.max(1) as f64 }).collect(),
            by_size: o
                .sizes
                .iter()
                .enumerate()
                .map(|(i, &t)| {
                    // An aggregate nothing was added to (an input the sample left out) has no sizes.
                    let (n, tin, tout) =
                        (self.size_n.get(i).copied().unwrap_or(0), self.size_in.get(i).copied().unwrap_or(0), self.size_out.get(i).copied().unwrap_or(0));
                    SizePoint { size: t, trajectories: n, removal: if tin == 0 { None } else { Some((tin as f64 - tout as f64) / tin as f64) } }
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_aggregate_has_a_row() {
        // Per-input rows of an input that the sample left without trajectories.
        let r = Agg::default().row(&Options::default());
        assert_eq!(r.tokens_in, 0);
        assert!(r.by_size.iter().all(|p| p.trajectories == 0 && p.removal.is_none()));
    }

    #[test]
    fn the_parts_of_the_stub_lines_sum_to_their_tokens() {
        let st = |l: &str| Stub::parse(l).unwrap();
        let lines = ["[lam: lines 94-109 of `sed -n 254 a.py`; _recall §3678]", "[lam: similar to lines 1-12,40 of `ls -la`, line 3 of this output]"];
        let mut stubs: Vec<Stub> = lines.iter().map(|l| st(l)).collect();
        stubs[1].set_own_id("3678");
        let mut memo = TokMemo(Default::default());
        let parts = part_tokens(&mut memo, &stubs, Recall::ARC);
        let whole: u64 = lines.iter().map(|l| memo.count(format!("{l}\n").as_bytes()) as u64).sum();
        assert_eq!(parts.iter().sum::<u64>(), whole);
        assert_eq!(
            parts[0],
            whole - memo.count(b"[lam: lines 94-109 of `sed -n 254 a.py`]\n") as u64 - memo.count(format!("{}\n", lines[1]).as_bytes()) as u64
        );
        assert!(parts[1] >= 6 && parts[2] >= 4 && parts[3] >= 16, "{parts:?}");
        let none = part_tokens(&mut memo, &stubs, Recall::None);
        assert_eq!(none[0], 0, "no handle written, none counted");
        assert_eq!(none[1..], parts[1..]);
        assert_eq!(part_tokens(&mut memo, &[], Recall::ARC), [0; 4]);
    }

    #[test]
    fn the_floor_counts_each_recall_and_each_representative_once() {
        let st = |l: &str| Stub::parse(l).unwrap();
        let mut a1 = st("[lam: similar to line 1 of `ls`, line 2 of this output; _recall §aaaaaaaa]");
        let mut a2 = st("[lam: similar to lines 4-5 of `ls`]");
        let mut a3 = st("[lam: line 7 of `pytest -q`]");
        for s in [&mut a1, &mut a2, &mut a3] {
            s.set_own_id("aaaaaaaa");
        }
        let d = st("[lam: line 1 of this output; _recall §dddddddd]");
        let mut memo = TokMemo(Default::default());
        let want = memo.count("_recall §aaaaaaaa".as_bytes()) + memo.count(" `ls`".as_bytes()) + memo.count("_recall §dddddddd".as_bytes());
        let all = [a1, a2, a3, d];
        assert_eq!(floor_tokens(&mut memo, &all, Recall::ARC), want as u64);
        assert_eq!(floor_tokens(&mut memo, &all, Recall::None), memo.count(" `ls`".as_bytes()) as u64, "no handle: the representative only");
        assert_eq!(floor_tokens(&mut memo, &[], Recall::ARC), 0);
    }
}
