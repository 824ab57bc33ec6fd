//! Stub lines: the place a run's stub names, the last record's stub lines,
//! a line stub's fields, and how L0 judges and writes a stub.

use crate::LineLoc;
use lam_core::TokenCounter;
use lam_core::stub::{LAST, LineStub, Place, Recall, Stub};

/// The place a run's stub names among those it repeats (with the shift of
/// their line numbers; exact copies first, each kind newest first): one
/// repeated exactly before one with moved numbers, then one of the call the
/// stub line above named (`above`: written `ditto`), then this output's,
/// else the call with the shortest name (the record's own call, `own`, when
/// it runs again: written `its last output`), the first of equals.
pub(crate) fn pick<'n>(
    cands: impl IntoIterator<Item = (LineLoc, i32)>,
    record: u32,
    name: impl Fn(u32) -> &'n str,
    above: Option<&str>,
    own: Option<&str>,
) -> Option<(LineLoc, i32)> {
    let cost = |(c, shift): &(LineLoc, i32)| {
        let call = name(c.record);
        let name = match call.len() {
            _ if c.record == record => 1,
            _ if above == Some(call) => 0,
            _ if own == Some(call) => LAST.len(),
            0 => "an earlier output".len(),
            n => n + 2,
        };
        (*shift != 0, name)
    };
    cands.into_iter().min_by_key(cost)
}

/// The last record's stub lines, `all[..live]`; the slots after them are
/// kept so that their strings are reused.
#[derive(Debug, Default, Clone)]
pub(crate) struct Stubs {
    pub(crate) all: Vec<Stub>,
    pub(crate) live: usize,
}

impl Stubs {
    /// Add a stub line: given whole, or (`Err`) a line stub's fields,
    /// written into a spare slot's strings when there is one.
    pub(crate) fn push(&mut self, stub: Result<Stub, LineFields<'_>>) -> &Stub {
        match (stub, self.all.get_mut(self.live)) {
            (Err(f), Some(Stub::Lines(l))) => f.write_into(l),
            (Ok(stub), Some(slot)) => *slot = stub,
            (Err(f), Some(slot)) => *slot = f.stub(),
            (Ok(stub), None) => self.all.push(stub),
            (Err(f), None) => self.all.push(f.stub()),
        }
        self.live += 1;
        &self.all[self.live - 1]
    }
}

/// The fields of a line stub L0 writes (`LineStub`), borrowed.
pub(crate) struct LineFields<'a> {
    pub(crate) id: &'a str,
    pub(crate) of: Option<&'a str>,
    pub(crate) first: u32,
    pub(crate) last: u32,
    pub(crate) recall: bool,
    pub(crate) shift: i32,
    pub(crate) ditto: bool,
    /// `of` is the record's own call, run again (written `of its last output`).
    pub(crate) own: bool,
}

impl LineFields<'_> {
    pub(crate) fn stub(&self) -> Stub {
        let from = Place::new(self.of.map(str::to_string), self.first, self.last);
        Stub::Lines(LineStub { id: self.id.to_string(), from, recall: self.recall, shift: self.shift, ditto: self.ditto, last: self.own, more: Vec::new() })
    }

    /// Overwrite `l` with these fields, reusing its strings.
    fn write_into(&self, l: &mut LineStub) {
        self.id.clone_into(&mut l.id);
        match (self.of, &mut l.from.of) {
            (Some(of), Some(was)) => of.clone_into(was),
            (of, was) => *was = of.map(str::to_string),
        }
        (l.from.first, l.from.last, l.recall, l.shift, l.ditto, l.last) = (self.first, self.last, self.recall, self.shift, self.ditto, self.own);
        l.more.clear();
    }
}

/// How L0 judges and writes a stub: the token counter and the recall handle.
#[derive(Clone, Copy)]
pub(crate) struct How {
    pub(crate) counter: Option<&'static dyn TokenCounter>,
    pub(crate) recall: Recall<'static>,
}
