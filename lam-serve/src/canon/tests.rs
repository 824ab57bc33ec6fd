use super::identity::identity;
use super::*;

fn ident(s: &str) -> Result<Vec<u8>, Unfaithful> {
    let n = parse(s.as_bytes())?;
    let mut out = Vec::new();
    identity(s.as_bytes(), &n, &mut out);
    Ok(out)
}

#[test]
fn identity_ignores_whitespace_and_annotations_only() {
    let a = ident(r#"{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}"#).unwrap();
    let b = ident(r#"{ "role" : "user", "content": [ {"type":"text", "text":"x"} ] }"#).unwrap();
    assert_eq!(a, b);
    assert_eq!(a, br#"{"role":"user","content":"x"}"#, "one text block reads as its string");
    let c = ident(r#"{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y","cache_control":{"type":"ephemeral"}}]}"#).unwrap();
    assert_eq!(c, br#"{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}"#);
    for (x, y) in [
        (r#"{"a":1,"b":2}"#, r#"{"b":2,"a":1}"#),
        (r#"{"n":18446744073709551616}"#, r#"{"n":18446744073709551617}"#),
        (r#"{"f":0.10000000000000000001}"#, r#"{"f":0.10000000000000000002}"#),
        (r#"{"s":"A"}"#, r#"{"s":"\u0041"}"#),
        (r#"{"n":1}"#, r#"{"n":1.0}"#),
    ] {
        assert_ne!(ident(x).unwrap(), ident(y).unwrap(), "{x} vs {y}");
    }
}

#[test]
fn one_text_block_is_the_string_it_stands_for() {
    // Claude Code 2.1.328: a `role: "system"` message as the block while it carries the mark, as the string after.
    let block = ident(r##"{"role":"system","content":[{"type":"text","text":"# Env\nx","cache_control":{"type":"ephemeral"}}]}"##).unwrap();
    let string = ident(r##"{"role":"system","content":"# Env\nx"}"##).unwrap();
    assert_eq!(block, string);
    assert_eq!(ident(r#"{"content":[{"text":"t","type":"text"}]}"#).unwrap(), ident(r#"{"content":"t"}"#).unwrap());
    // tool_result content at depth too.
    let a = ident(r#"{"content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"out"}]}]}"#).unwrap();
    let b = ident(r#"{"content":[{"type":"tool_result","tool_use_id":"x","content":"out"}]}"#).unwrap();
    assert_eq!(a, b);
    // Anything more than one plain text block stays itself.
    for other in [
        r#"{"content":[{"type":"text","text":"t"},{"type":"text","text":"u"}]}"#,
        r#"{"content":[{"type":"text","text":"t","citations":[]}]}"#,
        r#"{"content":[{"type":"input_text","text":"t"}]}"#,
        r#"{"content":[{"type":"text","text":1}]}"#,
        r#"{"content":["t"]}"#,
        r#"{"text":[{"type":"text","text":"t"}]}"#,
    ] {
        assert_ne!(ident(other).unwrap(), ident(r#"{"content":"t"}"#).unwrap(), "{other}");
    }
}

#[test]
fn tool_arguments_are_read_byte_for_byte() {
    // A tool whose own arguments are named `content` or `cache_control`.
    let call = |input: &str| format!(r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t1","name":"write","input":{input}}}]}}"#);
    let block = call(r#"{"path":"a","content":[{"type":"text","text":"x"}]}"#);
    let string = call(r#"{"path":"a","content":"x"}"#);
    assert_ne!(ident(&block).unwrap(), ident(&string).unwrap(), "an argument's block is not its string");
    let marked = call(r#"{"path":"a","cache_control":"no-store"}"#);
    let plain = call(r#"{"path":"a"}"#);
    assert_ne!(ident(&marked).unwrap(), ident(&plain).unwrap(), "an argument named cache_control counts");
    let n = parse(marked.as_bytes()).unwrap();
    assert!(annotations(marked.as_bytes(), &n).is_empty(), "nothing inside the arguments is an annotation");
    assert_eq!(reannotate(marked.as_bytes(), &n, &[]), marked.as_bytes(), "arguments are never re-written");
    // The block that carries the call keeps its own mark apart.
    let a = ident(r#"{"content":[{"type":"tool_use","id":"t","name":"n","input":{},"cache_control":{"type":"ephemeral"}}]}"#).unwrap();
    let b = ident(r#"{"content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}"#).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_string_takes_the_mark_the_client_puts_on_its_long_form() {
    let frozen = br#"{"role":"system","content":"s"}"#;
    let later = br#"{"role":"system","content":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]}"#;
    let want = annotations(later, &parse(later).unwrap());
    let out = reannotate(frozen, &parse(frozen).unwrap(), &want);
    assert_eq!(String::from_utf8(out.clone()).unwrap(), String::from_utf8(later.to_vec()).unwrap());
    let (mut x, mut y) = (Vec::new(), Vec::new());
    identity(&out, &parse(&out).unwrap(), &mut x);
    identity(frozen, &parse(frozen).unwrap(), &mut y);
    assert_eq!(x, y, "the content is the same");
    // The long form frozen, the string sent now without a mark: the block, unmarked.
    let back = reannotate(later, &parse(later).unwrap(), &[]);
    assert_eq!(back, br#"{"role":"system","content":[{"type":"text","text":"s"}]}"#.to_vec());
}

#[test]
fn duplicates_and_depth_are_unfaithful() {
    assert_eq!(ident(r#"{"a":1,"a":2}"#), Err(Unfaithful));
    assert_eq!(ident(r#"{"a":1,"\u0061":2}"#), Err(Unfaithful));
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 2), "]".repeat(MAX_DEPTH + 2));
    assert_eq!(ident(&deep), Err(Unfaithful));
    assert_eq!(ident("[1,]"), Err(Unfaithful));
    assert_eq!(ident(r#"{"a":1} x"#), Err(Unfaithful));
}

#[test]
fn annotations_move_and_the_rest_stays_byte_for_byte() {
    let frozen = br#"{"role":"user", "content":[{"type":"tool_result","content":"ok","cache_control":{"type":"ephemeral"}}, {"type":"text","text":"t"}]}"#;
    let later =
        br#"{"role":"user","content":[{"type":"tool_result","content":"LONG ORIGINAL"},{"type":"text","text":"t","cache_control":{"type":"ephemeral"}}]}"#;
    let n = parse(frozen).unwrap();
    let want = annotations(later, &parse(later).unwrap());
    assert_eq!(want, vec![(Path::new().key("content").index(1), "cache_control".into(), br#"{"type":"ephemeral"}"#.to_vec())]);
    let out = reannotate(frozen, &n, &want);
    assert_eq!(
        String::from_utf8(out.clone()).unwrap(),
        r#"{"role":"user", "content":[{"type":"tool_result","content":"ok"}, {"type":"text","text":"t","cache_control":{"type":"ephemeral"}}]}"#
    );
    // Same annotations: the frozen bytes exactly.
    let own = annotations(frozen, &n);
    assert_eq!(reannotate(frozen, &n, &own), frozen.to_vec());
    // No annotations wanted: every mark removed.
    let none = reannotate(frozen, &n, &[]);
    assert!(!String::from_utf8(none).unwrap().contains("cache_control"));
}

#[test]
fn paths_and_splices() {
    let b = br#"{"content":[{"text":"a"},{"a/b":"c"}]}"#;
    let n = parse(b).unwrap();
    let s = find(&n, &Path::new().key("content").index(1).key("a/b")).unwrap();
    assert_eq!(&b[s.span.clone()], br#""c""#);
    assert!(find(&n, &Path::new().key("content").index(9)).is_none());
    assert!(find(&n, &Path::new().index(0)).is_none(), "an index steps into arrays only");
    let out = splice(b, vec![(s.span.clone(), br#""z""#.to_vec())]);
    assert_eq!(out, br#"{"content":[{"text":"a"},{"a/b":"z"}]}"#.to_vec());
}

/// A mark taken off or put on gives the bytes the client sends without or
/// with it, in the client's own style: Python's `json.dumps` (`, ` and
/// `: `), an indented dump, and compact JSON alike (replicas that never saw
/// the marked form forward the same bytes as one that froze it).
#[test]
fn marks_move_in_the_client_s_own_style() {
    let styles: [(&str, &str, &str); 3] = [(",", ":", ""), (", ", ": ", ""), (",\n  ", ": ", "\n")];
    for (comma, colon, nl) in styles {
        let obj = |members: &[(&str, &str)]| {
            let inner: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\"{colon}{v}")).collect();
            format!("{{{nl}{}{nl}}}", inner.join(comma))
        };
        let mark = r#"{"type": "ephemeral"}"#;
        let block = |marked: bool| {
            let mut m = vec![("type", "\"tool_result\""), ("tool_use_id", "\"toolu_1\""), ("content", "\"out\"")];
            if marked {
                m.push(("cache_control", mark));
            }
            obj(&m)
        };
        let item = |marked: bool| obj(&[("role", "\"user\""), ("content", &format!("[{}]", block(marked)))]);
        let (marked, plain) = (item(true), item(false));
        let (m, p) = (parse(marked.as_bytes()).unwrap(), parse(plain.as_bytes()).unwrap());
        assert_eq!(String::from_utf8(reannotate(marked.as_bytes(), &m, &[])).unwrap(), plain, "unmarked, {comma:?}");
        let want = annotations(marked.as_bytes(), &m);
        assert_eq!(String::from_utf8(reannotate(plain.as_bytes(), &p, &want)).unwrap(), marked, "marked, {comma:?}");
    }
    // A string content turned into the long form the client marks, spaced as it spaces.
    let frozen = br#"{"role": "system", "content": "s"}"#;
    let later = br#"{"role": "system", "content": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}]}"#;
    let want = annotations(later, &parse(later).unwrap());
    assert_eq!(String::from_utf8(reannotate(frozen, &parse(frozen).unwrap(), &want)).unwrap(), String::from_utf8(later.to_vec()).unwrap());
}
