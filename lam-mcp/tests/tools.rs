//! The server through rmcp's own client over an in-process transport, on a
//! FileStore: exact recall (whole, parts, invalid UTF-8), metadata, catalog
//! pages, scope, and errors that come back as tool errors on a connection
//! that stays usable.

use arc_store::{FileStore, StoreSpec};
use arc_view::{Catalog, cut_parts};
use base64::Engine;
use lam_core::{ObsStore, Record, SessionId};
use lam_mcp::{Archive, Config, RecallServer};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, RawContent, ResourceContents};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};
use std::sync::Arc;

type Client = RunningService<RoleClient, ()>;

fn rec(i: u32, action: &str, obs: &[u8]) -> Record {
    Record { index: i, action: action.into(), observation: obs.to_vec(), returncode: Some(i as i32 % 2) }
}

fn big() -> Vec<u8> {
    (0..1500).map(|k| format!("line {k}: some output ü with words {} and more\n", k * 7919 % 1000)).collect::<String>().into_bytes()
}

const BAD: &[u8] = b"ok \xff\xfe not utf-8 \xc3\n";

/// A store with sessions `a` (small, big, invalid UTF-8, shared) and `b` (shared); returns the shown ids.
fn fill(dir: &std::path::Path) -> Vec<String> {
    let mut st = FileStore::open(dir).unwrap();
    let (a, b) = (SessionId::new("a"), SessionId::new("b"));
    let mut shown = Vec::new();
    for (i, (act, obs)) in [("echo hi", b"hello\n".to_vec()), ("cat big.txt", big()), ("cat bin", BAD.to_vec()), ("ls", b"x\ny\n".to_vec())].iter().enumerate()
    {
        shown.push(st.append(&a, &rec(i as u32, act, obs), 3).unwrap().shown);
    }
    for i in 0..40u32 {
        st.append(&a, &rec(10 + i, &format!("cat file{i}.txt"), format!("file {i}\n").as_bytes()), 3).unwrap();
    }
    assert_eq!(st.append(&b, &rec(0, "ls", b"x\ny\n"), 3).unwrap().shown, shown[3]);
    st.flush().unwrap();
    shown
}

fn config(dir: &std::path::Path) -> Config {
    let mut c = Config::new(StoreSpec::Dir(dir.into()));
    c.part_tokens = 256;
    c.page_tokens = 160;
    c
}

/// How long any one exchange with the server may take before the test
/// fails naming it (a hang is a failure, not a stalled CI).
const WAIT: std::time::Duration = std::time::Duration::from_secs(20);

async fn connect(archive: Archive) -> Client {
    // Larger than any answer here (the big observation's is ~75 KB): with a
    // 64 KiB pipe, the server's write of that answer waited for the client to
    // read, and in about 1 run in 15 on a loaded 2-core machine the two never
    // met (the test hung in CI; rmcp client and server share one runtime).
    let (c, s) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = RecallServer::new(Arc::new(archive)).serve(s).await {
            let _ = running.waiting().await;
        }
    });
    tokio::time::timeout(WAIT, ().serve(c)).await.expect("no handshake within WAIT").expect("client handshake")
}

async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let p = CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().expect("object").clone());
    tokio::time::timeout(WAIT, client.call_tool(p))
        .await
        .unwrap_or_else(|_| panic!("no answer to {tool} {args} within {WAIT:?}"))
        .expect("a tool result, not a protocol error")
}

fn texts(r: &CallToolResult) -> Vec<String> {
    r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect()
}

fn ok_text(r: &CallToolResult) -> String {
    assert_ne!(r.is_error, Some(true), "{:?}", texts(r));
    assert_eq!(r.content.len(), 1, "{:?}", texts(r));
    texts(r).remove(0)
}

fn err_text(r: &CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "expected a tool error, got {:?}", texts(r));
    texts(r).join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recall_is_exact_and_errors_are_tool_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ids = fill(dir.path());
    let client = connect(Archive::open(config(dir.path())).unwrap()).await;

    let tools = tokio::time::timeout(WAIT, client.list_all_tools()).await.expect("no tool list within WAIT").unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, ["catalog", "recall", "recall_meta"]);

    // Whole observations, with and without §, in any case.
    assert_eq!(ok_text(&call(&client, "recall", json!({"id": format!("§{}", ids[0])})).await), "hello\n");
    assert_eq!(ok_text(&call(&client, "recall", json!({"id": ids[0].to_uppercase()})).await), "hello\n");
    assert_eq!(ok_text(&call(&client, "recall", json!({"id": ids[1]})).await).as_bytes(), big());
    // Shared by two sessions with the same bytes: found without a session, and in each.
    assert_eq!(ok_text(&call(&client, "recall", json!({"id": ids[3]})).await), "x\ny\n");
    assert_eq!(ok_text(&call(&client, "recall", json!({"id": ids[3], "session": "b"})).await), "x\ny\n");

    // Parts: cut as lam recall cuts them (cl100k, 256 tokens), concatenating to the whole.
    let parts = cut_parts(&lam_trajectory::Cl100k, &big(), 256);
    assert!(parts.len() > 3);
    let m = parts.len();
    let mut joined = Vec::new();
    for k in 1..=m {
        let sel = if k % 2 == 0 { json!(format!("{k}/{m}")) } else { json!(k) };
        let t = ok_text(&call(&client, "recall", json!({"id": ids[1], "part": sel})).await);
        assert_eq!(t.as_bytes(), &big()[parts[k - 1].clone()], "part {k}");
        joined.extend_from_slice(t.as_bytes());
    }
    assert_eq!(joined, big());

    // Invalid UTF-8: lossy text, a note, and the exact bytes as a base64 blob.
    let r = call(&client, "recall", json!({"id": ids[2]})).await;
    assert_ne!(r.is_error, Some(true));
    assert_eq!(r.content.len(), 3);
    assert_eq!(texts(&r)[0], String::from_utf8_lossy(BAD));
    assert!(texts(&r)[1].contains("not valid UTF-8"), "{:?}", texts(&r));
    let RawContent::Resource(res) = &r.content[2].raw else { panic!("third item is not a resource: {:?}", r.content[2]) };
    let ResourceContents::BlobResourceContents { blob, mime_type, .. } = &res.resource else { panic!("not a blob") };
    assert_eq!(mime_type.as_deref(), Some("application/octet-stream"));
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(blob).unwrap(), BAD);

    // Errors: tool errors with a clear message, and the session goes on.
    let unknown = err_text(&call(&client, "recall", json!({"id": "§0000ffff"})).await);
    assert!(unknown.contains("no §0000ffff in the archive") && unknown.contains("nearest"), "{unknown}");
    for (part, says) in
        [(json!("0"), "does not exist"), (json!(format!("{}", m + 1)), "does not exist"), (json!("1/99"), "not 99"), (json!("one"), "expected K or K/N")]
    {
        let e = err_text(&call(&client, "recall", json!({"id": ids[1], "part": part})).await);
        assert!(e.contains(says) && e.contains(&format!("§{}", ids[1])), "{e}");
    }
    let e = err_text(&call(&client, "recall", json!({"id": "not-an-id"})).await);
    assert!(e.contains("expected §hex"), "{e}");
    let e = err_text(&call(&client, "recall", json!({"id": ids[0], "session": "b"})).await);
    assert!(e.contains(&format!("no §{}", ids[0])), "{e}");
    // Arguments that miss the schema are tool errors too; an unknown tool is a protocol error; neither drops the connection.
    assert!(err_text(&call(&client, "recall", json!({"part": 1})).await).contains("missing field `id`"));
    assert!(err_text(&call(&client, "catalog", json!({"page": "two"})).await).contains("failed to deserialize"));
    assert!(
        tokio::time::timeout(WAIT, client.call_tool(CallToolRequestParams::new("no_such_tool"))).await.expect("no answer to no_such_tool within WAIT").is_err()
    );
    assert_eq!(ok_text(&call(&client, "recall", json!({"id": ids[0]})).await), "hello\n");
    tokio::time::timeout(WAIT, client.cancel()).await.expect("the client did not close within WAIT").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_and_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let ids = fill(dir.path());
    let client = connect(Archive::open(config(dir.path())).unwrap()).await;

    let meta: Value = serde_json::from_str(&ok_text(&call(&client, "recall_meta", json!({"id": ids[1]})).await)).unwrap();
    assert_eq!(meta["id"], format!("§{}", ids[1]));
    assert_eq!(meta["bytes"], big().len());
    assert_eq!(meta["parts"], cut_parts(&lam_trajectory::Cl100k, &big(), 256).len());
    assert_eq!(meta["part_tokens"], 256);
    assert_eq!(meta["sessions"], json!(["a"]));
    assert_eq!(meta["first_line"], "line 0: some output ü with words 0 and more");
    assert_eq!(meta["action"], "cat big.txt");
    assert_eq!(meta["utf8"], true);
    let shared: Value = serde_json::from_str(&ok_text(&call(&client, "recall_meta", json!({"id": ids[3]})).await)).unwrap();
    assert_eq!(shared["sessions"], json!(["a", "b"]));
    let bad: Value = serde_json::from_str(&ok_text(&call(&client, "recall_meta", json!({"id": ids[2]})).await)).unwrap();
    assert_eq!(bad["utf8"], false);
    assert!(err_text(&call(&client, "recall_meta", json!({"id": "§0000ffff"})).await).contains("no §0000ffff"));

    // The catalog: the pages ARC's Catalog renders, covering every id of the session once.
    let store = FileStore::open_read_only(dir.path()).unwrap();
    let a = SessionId::new("a");
    let mut expect = Catalog::new(&lam_trajectory::Cl100k, 160);
    for id in store.ids(&a).unwrap() {
        expect.push(&lam_trajectory::Cl100k, &store.meta(&a, &id).unwrap().unwrap());
    }
    assert!(expect.pages() > 2);
    let mut seen = Vec::new();
    for k in 1..=expect.pages() {
        let page = ok_text(&call(&client, "catalog", json!({"session": "a", "page": k})).await);
        let arc = expect.page(&lam_trajectory::Cl100k, k - 1).unwrap().0;
        assert_eq!(page, arc.replacen("catalog next | catalog prev | catalog page N; _recall §id]", "call `catalog` with page=N; `recall` with id=§id]", 1));
        assert!(page.starts_with(&format!("[catalog page {k}/{}", expect.pages())), "{page}");
        seen.extend(page.lines().skip(1).map(|l| l.split_whitespace().next().unwrap().trim_start_matches('§').to_string()));
    }
    assert_eq!(seen, store.ids(&a).unwrap());
    assert_eq!(
        ok_text(&call(&client, "catalog", json!({"session": "a"})).await),
        expect.page(&lam_trajectory::Cl100k, 0).unwrap().0.replacen(
            "catalog next | catalog prev | catalog page N; _recall §id]",
            "call `catalog` with page=N; `recall` with id=§id]",
            1
        )
    );
    let e = err_text(&call(&client, "catalog", json!({"session": "a", "page": expect.pages() + 1})).await);
    assert!(e.contains("does not exist") && e.contains(&format!("{} pages", expect.pages())), "{e}");
    assert!(err_text(&call(&client, "catalog", json!({"session": "a", "page": 0})).await).contains("page 0 does not exist"));
    let e = err_text(&call(&client, "catalog", json!({"session": "zz"})).await);
    assert!(e.contains("session `zz` holds no observations") && e.contains("`a`, `b`"), "{e}");
    // Without a session: the sessions.
    let list = ok_text(&call(&client, "catalog", json!({})).await);
    assert!(list.contains("\na (44 observations)\n") && list.contains("\nb (1 observation)\n"), "{list}");
    tokio::time::timeout(WAIT, client.cancel()).await.expect("the client did not close within WAIT").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_server_serves_one_session() {
    let dir = tempfile::tempdir().unwrap();
    let ids = fill(dir.path());
    let mut cfg = config(dir.path());
    cfg.session = Some(SessionId::new("b"));
    let client = connect(Archive::open(cfg).unwrap()).await;
    let shared: Value = serde_json::from_str(&ok_text(&call(&client, "recall_meta", json!({"id": ids[3]})).await)).unwrap();
    assert_eq!(shared["sessions"], json!(["b"]));
    assert!(err_text(&call(&client, "recall", json!({"id": ids[0]})).await).contains(&format!("no §{}", ids[0])));
    let e = err_text(&call(&client, "recall", json!({"id": ids[3], "session": "a"})).await);
    assert!(e.contains("scoped to session `b`"), "{e}");
    assert!(ok_text(&call(&client, "catalog", json!({})).await).starts_with("[catalog page 1/1: 1 of 1 archived observations"));
    tokio::time::timeout(WAIT, client.cancel()).await.expect("the client did not close within WAIT").unwrap();
}

#[test]
fn a_miss_reopens_the_store_to_see_later_appends() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let archive = Archive::open(config(dir.path())).unwrap();
    let mut w = FileStore::open(dir.path()).unwrap();
    let m = w.append(&SessionId::new("c"), &rec(0, "date", b"later\n"), 2).unwrap();
    w.flush().unwrap();
    std::thread::sleep(lam_mcp::REOPEN_AFTER);
    assert_eq!(archive.recall(&m.shown, None, None).unwrap().bytes, b"later\n");
    assert!(archive.catalog(Some("c"), None).unwrap().contains(&format!("§{} #1", m.shown)));
}

#[test]
fn bad_settings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let mut c = config(dir.path());
    c.page_tokens = 10;
    assert!(Archive::open(c).unwrap_err().to_string().contains("page tokens must be at least"));
    let mut c = config(dir.path());
    c.part_tokens = 0;
    assert!(Archive::open(c).is_err());
    let missing = Archive::open(config(&dir.path().join("nope"))).unwrap_err().to_string();
    assert!(missing.contains("nope"), "{missing}");
}

#[test]
fn the_catalog_names_the_mcp_tools_not_typed_commands() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let archive = Archive::open(config(dir.path())).unwrap();
    let page = archive.catalog(Some("a"), None).unwrap();
    let header = page.lines().next().unwrap();
    assert!(header.contains("call `catalog` with page=N; `recall` with id=§id"), "{header}");
    assert!(!page.contains("catalog next") && !page.contains("_recall"), "{page}");
}

#[test]
fn a_run_scoped_server_serves_only_that_runs_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let mut st = FileStore::open(dir.path()).unwrap();
    let mut put = |s: &str, obs: &[u8]| st.append(&SessionId::new(s), &rec(0, "cat .env", obs), 2).unwrap().shown;
    let mine = put("serve-100-42-1", b"mine\n");
    let named = put("task@serve-100-42-2", b"named\n");
    let claimed = put("serve-100-42-3@2", b"claimed again\n");
    let run = put("serve-100-42", b"the run's own session\n");
    let client = put("task", b"SECRET=a client's own name\n");
    let other = put("serve-100-421-1", b"SECRET=other run\n");
    let plain = put("other", b"SECRET=no run\n");
    st.flush().unwrap();
    let mut cfg = config(dir.path());
    cfg.run = Some("serve-100-42".into());
    let archive = Archive::open(cfg).unwrap();
    assert_eq!(archive.recall(&mine, None, None).unwrap().bytes, b"mine\n");
    assert_eq!(archive.recall(&named, None, None).unwrap().bytes, b"named\n");
    assert_eq!(archive.recall(&claimed, None, None).unwrap().bytes, b"claimed again\n");
    assert_eq!(archive.recall(&run, None, None).unwrap().bytes, b"the run's own session\n");
    for id in [&other, &plain, &client] {
        let e = archive.recall(id, None, None).unwrap_err().to_string();
        assert!(!e.contains("serve-100-421-1") && !e.contains("`other`"), "{e}");
    }
    let e = archive.recall(&other, Some("serve-100-421-1"), None).unwrap_err().to_string();
    assert!(e.contains("only the sessions of run `serve-100-42`"), "{e}");
    let list = archive.catalog(None, None).unwrap();
    assert!(list.starts_with("[4 sessions in the archive") && !list.contains("421") && !list.contains("\nother"), "{list}");
    assert!(archive.catalog(Some("other"), None).is_err());
}

/// Issue 57: a client-supplied string (an id, a session, a part, a page, a
/// method) is quoted in a message by a short prefix and its size, never
/// whole: a 1,000,000-character id gave a 1 MB tool result in the model's
/// context. Each answer stays under 1 KiB and still says what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_client_string_is_quoted_short() {
    use rmcp::model::{ClientRequest, CustomRequest};
    const SMALL: usize = 1024;
    let dir = tempfile::tempdir().unwrap();
    let ids = fill(dir.path());
    let (hex, junk) = ("a".repeat(1_000_000), "§zz".repeat(333_334));
    let client = connect(Archive::open(config(dir.path())).unwrap()).await;
    let cases = [
        ("recall", json!({"id": hex}), "in the archive"),
        ("recall", json!({"id": format!("§{hex}")}), "in the archive"),
        ("recall", json!({"id": junk}), "expected §hex"),
        ("recall_meta", json!({"id": hex}), "in the archive"),
        ("recall_meta", json!({"id": junk}), "expected §hex"),
        ("recall", json!({"id": ids[1], "part": hex}), "expected K or K/N"),
        ("recall", json!({"id": ids[1], "part": format!("1/{}7", "0".repeat(1_000_000))}), "not 7"),
        ("catalog", json!({"session": hex}), "holds no observations"),
        ("catalog", json!({"page": "9".repeat(1_000_000)}), "failed to deserialize"),
    ];
    for (tool, args, says) in cases {
        let e = err_text(&call(&client, tool, args.clone()).await);
        assert!(e.len() < SMALL && e.contains(says), "{tool} {}: {} bytes: {}", &args.to_string()[..80], e.len(), &e[..e.len().min(300)]);
        assert!(e.contains("aaaaaaaa") || e.contains("§zz") || e.contains("99999999") || e.contains("0000000"), "quotes a prefix: {e}");
    }
    let e = err_text(&call(&client, "recall", json!({"id": hex})).await);
    assert!(e.contains(&format!("no §{}… (1000000 bytes) in the archive", &hex[..64])), "{e}");
    // A method nobody serves: rmcp's answer quotes it.
    let method = "m".repeat(1_000_000);
    let err = client.send_request(ClientRequest::CustomRequest(CustomRequest::new(method, None))).await.unwrap_err().to_string();
    assert!(err.len() < SMALL && err.contains("mmmm"), "{} bytes: {}", err.len(), &err[..err.len().min(300)]);
    // Scopes quote the session asked.
    let mut cfg = config(dir.path());
    cfg.session = Some(SessionId::new("b"));
    let scoped = connect(Archive::open(cfg).unwrap()).await;
    let e = err_text(&call(&scoped, "recall", json!({"id": ids[3], "session": hex})).await);
    assert!(e.len() < SMALL && e.contains("scoped to session `b`"), "{} bytes", e.len());
    let mut cfg = config(dir.path());
    cfg.run = Some("r".into());
    let run = connect(Archive::open(cfg).unwrap()).await;
    let e = err_text(&call(&run, "catalog", json!({"session": hex})).await);
    assert!(e.len() < SMALL && e.contains("only the sessions of run `r`"), "{} bytes", e.len());
    for c in [client, scoped, run] {
        c.cancel().await.unwrap();
    }
}
