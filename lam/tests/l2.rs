//! L2 in the pipeline: `lam compact --out DIR --codec` stores exactly the
//! retained chunks' embeddings through the codec, within its bound.

use lam_core::Encoder;

#[test]
fn compact_stores_retained_embeddings_through_the_codec() {
    let dir = std::env::temp_dir().join(format!("lam-l2-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ex = lam_core::testsuite::example();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lam"))
        .args(["compact", ex.to_str().unwrap(), "--encoder", "hashing", "--no-tokens", "--out", dir.to_str().unwrap(), "--codec", "szp"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("retained embeddings (L2)"));
    let stream = std::fs::read(dir.join("edit-session.retained.lamc")).unwrap();
    let mut got = Vec::new();
    let h = lam_codec::decode(&stream, &mut got).unwrap();
    // The retained chunks, in order, from the decisions file.
    let traj = lam_trajectory::read::read_path(&ex).unwrap().remove(0);
    let decisions = std::fs::read_to_string(dir.join("edit-session.decisions.jsonl")).unwrap();
    let mut enc = lam_encode::HashingEncoder::default();
    let mut want = Vec::new();
    let mut texts: Vec<Vec<u8>> = Vec::new();
    for line in decisions.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["decision"] == "retained" {
            let r = &traj.records[v["record"].as_u64().unwrap() as usize];
            let (a, b) = (v["start"].as_u64().unwrap() as usize, v["end"].as_u64().unwrap() as usize);
            texts.push(r.observation[a..b].to_vec());
        }
    }
    assert!(!texts.is_empty());
    let refs: Vec<&[u8]> = texts.iter().map(|t| &t[..]).collect();
    want.resize(refs.len() * 384, 0.0);
    enc.encode_batch(&refs, &mut want).unwrap();
    assert_eq!((h.rows as usize, h.dim as usize), (texts.len(), 384));
    let eb = h.bound_abs;
    assert!(eb > 0.0);
    for (x, y) in want.iter().zip(&got) {
        assert!(((x - y).abs() as f64) <= eb, "{x} vs {y}, bound {eb}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
