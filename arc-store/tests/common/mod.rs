//! Helpers shared by the integration tests: the `ObsStore` conformance suite
//! lives in `lam_core::testsuite` (feature `testsuite`); these names keep the
//! tests short.
#![allow(dead_code, unused_imports)]

pub use lam_core::testsuite::{colliding_pair, obs_store as behaviour, obs_store_collision as collision, rec, samples, sid};

use arc_store::{Durability, FileStore, Options};
use lam_core::ObsStore;
use std::fs;
use std::path::{Path, PathBuf};

pub const OPTS: Options = Options { durability: Durability::None, segment_bytes: 64 << 20 };

/// Write `n` records of session `t` to a fresh store in `dir`; returns (shown, observation) of each.
pub fn fill(dir: &Path, n: u32, opts: Options) -> Vec<(String, Vec<u8>)> {
    let mut s = FileStore::open_with(dir, opts).unwrap();
    (0..n)
        .map(|i| {
            let mut obs = format!("observation {i}\n").repeat(3 + i as usize).into_bytes();
            obs.push(0xff);
            let m = s.append(&sid("t"), &rec(i, "run", &obs, Some(i as i32)), 5).unwrap();
            (m.shown, obs)
        })
        .collect()
}

pub fn last_segment(dir: &Path) -> PathBuf {
    let mut v: Vec<_> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("seg-")).collect();
    v.sort();
    v.pop().unwrap()
}

/// File offsets of the records of a (well-formed) segment.
pub fn record_offsets(seg: &Path) -> Vec<u64> {
    let b = fs::read(seg).unwrap();
    let mut v = Vec::new();
    let mut o = 16usize;
    while o < b.len() {
        v.push(o as u64);
        o += 8 + u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    }
    v
}

pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Every file under `dir` (recursively) with its bytes: to show that something wrote nothing.
pub fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.clone(), fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Flip bits `mask` of byte `at` of `file`.
pub fn flip(file: &Path, at: u64, mask: u8) {
    let mut b = fs::read(file).unwrap();
    b[at as usize] ^= mask;
    fs::write(file, &b).unwrap();
}
