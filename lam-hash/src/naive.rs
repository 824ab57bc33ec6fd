//! The L0 rule written the obvious way, as the reference the fast
//! [`crate::LineDedup`] is tested against (same residuals, same stubs) and
//! benchmarked beside: lines split one by one, the whole line bytes as the
//! table key (no hash), each run of lines collected before it is judged.

use crate::{LineLoc, Segment};
use lam_core::TokenCounter;
use lam_core::stub::{LineStub, Place, Recall, Stub, line_stub_len, worth_replacing};
use std::collections::HashMap;

/// One session's L0 state, the obvious way.
#[derive(Debug, Default)]
pub struct NaiveLineDedup {
    seen: HashMap<Vec<u8>, LineLoc>,
    calls: Vec<String>,
    counter: Option<&'static dyn TokenCounter>,
}

fn blank(line: &[u8]) -> bool {
    line.iter().all(|b| b.is_ascii_whitespace())
}

impl NaiveLineDedup {
    /// An empty session, judging stubs with `counter` (bytes without one).
    pub fn new(counter: Option<&'static dyn TokenCounter>) -> Self {
        Self { counter, ..Self::default() }
    }

    /// Same contract as [`crate::LineDedup::process`]; returns the stubs written.
    pub fn process(&mut self, record: u32, this_id: &str, this_call: &str, segments: &[Segment<'_>], out: &mut Vec<u8>) -> Vec<Stub> {
        self.calls.resize(self.calls.len().max(record as usize + 1), String::new());
        self.calls[record as usize] = this_call.to_string();
        let start = out.len();
        let mut stubs: Vec<Stub> = Vec::new();
        // Newlines of this record's residual written so far, for line numbers.
        let mut n = 0u32;
        let put = |out: &mut Vec<u8>, n: &mut u32, bytes: &[u8]| {
            *n += bytes.iter().filter(|&&b| b == b'\n').count() as u32;
            out.extend_from_slice(bytes);
        };
        let put_stub = |out: &mut Vec<u8>, n: &mut u32, line: &str| {
            if out.len() > start && out.last() != Some(&b'\n') {
                out.push(b'\n');
                *n += 1;
            }
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
            *n += 1;
        };
        for seg in segments {
            match *seg {
                Segment::Stub(s) => {
                    let mut s = s.clone();
                    s.set_recall(stubs.is_empty());
                    put_stub(out, &mut n, &s.to_string());
                    stubs.push(s);
                }
                Segment::Text(text) => {
                    let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
                    let mut i = 0;
                    while i < lines.len() {
                        let key = lines[i].strip_suffix(b"\n").unwrap_or(lines[i]);
                        let Some(&first) = (!blank(key)).then(|| self.seen.get(key)).flatten() else {
                            if !blank(key) {
                                self.seen.insert(key.to_vec(), LineLoc { record, line: n + 1 });
                            }
                            put(out, &mut n, lines[i]);
                            i += 1;
                            continue;
                        };
                        // A run: repeated lines, with the blank lines between them.
                        // It repeats one stretch of one residual, line for line.
                        let mut j = i + 1;
                        let mut body_end = i + 1;
                        let mut last = first.line;
                        while j < lines.len() {
                            let k = lines[j].strip_suffix(b"\n").unwrap_or(lines[j]);
                            let expect = first.line + (j - i) as u32;
                            if blank(k) {
                                j += 1;
                            } else if self.seen.get(k).is_some_and(|l| l.record == first.record && l.line == expect) {
                                last = expect;
                                j += 1;
                                body_end = j;
                            } else {
                                break;
                            }
                        }
                        let body: Vec<u8> = lines[i..body_end].concat();
                        let stub = LineStub {
                            id: this_id.to_string(),
                            from: Place::new((first.record != record).then(|| self.calls[first.record as usize].clone()), first.line, last),
                            recall: stubs.is_empty(),
                        };
                        let newlines = 1 + usize::from(out.len() > start && out.last() != Some(&b'\n'));
                        let len = line_stub_len(&stub.from, &stub.id, stub.recall, Recall::ARC);
                        if worth_replacing(self.counter, len, || stub.to_string(), newlines, &body) {
                            put_stub(out, &mut n, &stub.to_string());
                            stubs.push(Stub::Lines(stub));
                        } else {
                            put(out, &mut n, &body);
                        }
                        for l in &lines[body_end..j] {
                            put(out, &mut n, l);
                        }
                        i = j;
                    }
                }
            }
        }
        stubs
    }
}
