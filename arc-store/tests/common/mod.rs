//! Helpers shared by the integration tests: record builders, a crafted id
//! collision and the `ObsStore` behaviour suite both stores run.
#![allow(dead_code)]

use lam_core::{ObsId, ObsStore, Record, SessionId, previews};

pub fn sid(s: &str) -> SessionId {
    SessionId(s.to_string())
}

pub fn rec(index: u32, action: &str, obs: &[u8], rc: Option<i32>) -> Record {
    Record { index, action: action.to_string(), observation: obs.to_vec(), returncode: rc }
}

/// Two different observations of action `cat` whose ids share the first 8 hex
/// characters (found by a birthday search over decimal strings; deterministic).
pub fn colliding_pair() -> (Vec<u8>, Vec<u8>) {
    use std::collections::HashMap;
    let mut seen: HashMap<[u8; 4], u64> = HashMap::new();
    for i in 0u64.. {
        let obs = format!("needle {i}\n");
        let id = ObsId::of(b"cat", obs.as_bytes());
        let key: [u8; 4] = id.0[..4].try_into().unwrap();
        if let Some(j) = seen.insert(key, i) {
            return (format!("needle {j}\n").into_bytes(), obs.into_bytes());
        }
    }
    unreachable!()
}

/// Observations every suite stores: invalid UTF-8, empty, long, multibyte at the preview cut.
pub fn samples() -> Vec<(String, Vec<u8>, Option<i32>)> {
    let mut long = Vec::new();
    for i in 0..2000 {
        long.extend_from_slice(format!("line {i}: é ü ✓\n").as_bytes());
    }
    vec![
        ("ls -la".into(), b"total 0\ndrwxr-xr-x  2 a a 40 .\n".to_vec(), Some(0)),
        ("cat bin".into(), vec![0xff, 0xfe, 0x00, b'a', 0xc3, 0x28, 0x80, 0xed, 0xa0, 0x80], Some(1)),
        ("true".into(), Vec::new(), None),
        ("seq".into(), long, Some(-9)),
        ("printf".into(), "é".repeat(200).into_bytes(), None),
    ]
}

/// The `ObsStore` behaviour every store must show. `s` must be empty.
pub fn behaviour<S: ObsStore>(s: &mut S) {
    let a = sid("A");
    let b = sid("B");
    let mut shown = Vec::new();
    for (i, (act, obs, rc)) in samples().into_iter().enumerate() {
        let m = s.append(&a, &rec(i as u32, &act, &obs, rc), 10 + i as u32).unwrap();
        let id = ObsId::of(act.as_bytes(), &obs);
        assert_eq!(m.id, id);
        assert_eq!(m.shown, id.hex()[..8]);
        assert_eq!(m.action, act);
        assert_eq!(m.returncode, rc);
        assert_eq!(m.step, i as u32);
        assert_eq!(m.bytes, obs.len() as u64);
        assert_eq!(m.tokens, 10 + i as u32);
        let (h, t) = previews(&obs);
        assert_eq!(m.head, obs[h]);
        assert_eq!(m.tail, obs[t]);
        assert_eq!(s.get(&a, &m.shown).unwrap().as_deref(), Some(&obs[..]), "exact bytes of {act}");
        assert_eq!(s.meta(&a, &m.shown).unwrap().as_ref(), Some(&m));
        shown.push(m.shown);
    }
    // Same content: the first record's metadata, no new id.
    let (act, obs, _) = samples().remove(1);
    let again = s.append(&a, &rec(99, &act, &obs, Some(5)), 1).unwrap();
    assert_eq!(again.shown, shown[1]);
    assert_eq!((again.step, again.returncode, again.tokens), (1, Some(1), 11));
    // Same observation, other action: another id.
    let other = s.append(&a, &rec(100, "cat other", &obs, None), 1).unwrap();
    assert_ne!(other.shown, shown[1]);
    shown.push(other.shown.clone());
    assert_eq!(s.ids(&a).unwrap(), shown);
    // Sessions are namespaces.
    for id in &shown {
        assert_eq!(s.get(&b, id).unwrap(), None);
        assert_eq!(s.meta(&b, id).unwrap(), None);
    }
    assert!(s.ids(&b).unwrap().is_empty());
    let mb = s.append(&b, &rec(0, &act, &obs, Some(7)), 3).unwrap();
    assert_eq!(mb.shown, shown[1], "ids are a function of content");
    assert_eq!((mb.step, mb.returncode, mb.tokens), (0, Some(7), 3), "B has its own record");
    assert_eq!(s.ids(&b).unwrap(), vec![mb.shown.clone()]);
    assert_eq!(s.get(&b, &shown[0]).unwrap(), None);
    // Unknown ids and prefixes do not resolve.
    assert_eq!(s.get(&a, "00000000").unwrap(), None);
    assert_eq!(s.get(&a, &shown[0][..7]).unwrap(), None);
    assert_eq!(s.get(&sid("nobody"), &shown[0]).unwrap(), None);
    assert!(s.ids(&sid("nobody")).unwrap().is_empty());
}

/// Collision extension: the second of two observations sharing 8 hex gets 12.
pub fn collision<S: ObsStore>(s: &mut S) -> (String, String) {
    let (x, y) = colliding_pair();
    let a = sid("coll");
    let mx = s.append(&a, &rec(0, "cat", &x, None), 1).unwrap();
    let my = s.append(&a, &rec(1, "cat", &y, None), 1).unwrap();
    assert_eq!(mx.shown.len(), 8);
    assert_eq!(my.shown.len(), 12);
    assert_eq!(&my.shown[..8], &mx.shown[..]);
    assert_eq!(s.get(&a, &mx.shown).unwrap().unwrap(), x);
    assert_eq!(s.get(&a, &my.shown).unwrap().unwrap(), y);
    // In another session the order differs, and so do the visible ids.
    let b = sid("coll-b");
    let my_b = s.append(&b, &rec(0, "cat", &y, None), 1).unwrap();
    let mx_b = s.append(&b, &rec(1, "cat", &x, None), 1).unwrap();
    assert_eq!(my_b.shown.len(), 8);
    assert_eq!(mx_b.shown.len(), 12);
    assert_eq!(s.get(&b, &mx_b.shown).unwrap().unwrap(), x);
    (mx.shown, my.shown)
}
