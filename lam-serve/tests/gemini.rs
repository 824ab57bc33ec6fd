//! The Gemini API as the third wire, on the shape Gemini CLI 0.61.0 sends
//! (docs/agents.md, "Gemini CLI 0.61.0"): `contents` of `user` and `model`
//! turns, calls as `functionCall` parts (`id`, `name`, `args`, the answer's
//! `thoughtSignature` beside), results as `functionResponse` parts whose
//! text is `response.output`, `systemInstruction` and `tools` as the
//! preamble; through `lam serve` on `/v1beta/models/MODEL:streamGenerateContent?alt=sse`.

mod support;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use lam_serve::{Api, Budget, Proxy, ServeConfig};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// One tool call of a Gemini CLI conversation and the text of its result.
struct Turn {
    tool: &'static str,
    args: Value,
    output: String,
}

/// A shell command's result as Gemini CLI words it.
fn shell(command: &str, out: &str) -> Turn {
    let output = format!("<untrusted_context>\nOutput: {out}\nProcess Group PGID: 24310\n</untrusted_context>");
    Turn { tool: "run_shell_command", args: json!({"command": command, "description": "Run it"}), output }
}

/// A `read_file` result (bare).
fn read(path: &str, text: &str) -> Turn {
    Turn { tool: "read_file", args: json!({"file_path": path}), output: text.to_string() }
}

/// Gemini CLI's request after `turns` (each call answered).
fn request(turns: &[Turn]) -> Vec<u8> {
    let mut contents = vec![json!({"role": "user", "parts": [
        {"text": "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n</session_context>"},
        {"text": "Look at app.py and run check.py"}]})];
    for (k, t) in turns.iter().enumerate() {
        let id = format!("{}_17965384092{k:02}_0", t.tool);
        let call = json!({"functionCall": {"id": id, "name": t.tool, "args": t.args}, "thoughtSignature": "skip_thought_signature_validator"});
        contents.push(json!({"role": "model", "parts": [call]}));
        contents.push(json!({"role": "user", "parts": [{"functionResponse": {"id": id, "name": t.tool, "response": {"output": t.output}}}]}));
    }
    let body = json!({
        "contents": contents,
        "systemInstruction": {"parts": [{"text": "You are Gemini CLI, an autonomous CLI agent specializing in software engineering tasks."}]},
        "tools": [{"functionDeclarations": [
            {"name": "run_shell_command", "description": "Runs a shell command.", "parametersJsonSchema": {"type": "object", "properties": {"command": {"type": "string"}}}},
            {"name": "read_file", "description": "Reads a file.", "parametersJsonSchema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
            {"name": "mcp_lam_recall", "description": "Recall an output by id.", "parametersJsonSchema": {"type": "object", "properties": {"id": {"type": "string"}}}}]}],
        "generationConfig": {"temperature": 1, "topP": 0.95, "topK": 64, "thinkingConfig": {"includeThoughts": true, "thinkingLevel": "HIGH"}},
    });
    serde_json::to_vec(&body).unwrap()
}

/// Raw bytes of each `contents` item of a body.
fn contents(body: &[u8]) -> Vec<String> {
    let members: std::collections::BTreeMap<String, Box<RawValue>> = serde_json::from_slice(body).unwrap();
    let list: Vec<Box<RawValue>> = serde_json::from_str(members["contents"].get()).unwrap();
    list.iter().map(|r| r.get().to_string()).collect()
}

/// The result text of each `user` turn after the task, as forwarded.
fn outputs(body: &[u8]) -> Vec<String> {
    let v: Value = serde_json::from_slice(body).unwrap();
    let turns = v["contents"].as_array().unwrap().iter().skip(1).filter(|c| c["role"] == "user");
    turns.map(|c| c["parts"][0]["functionResponse"]["response"]["output"].as_str().unwrap().to_string()).collect()
}

fn log(n: usize) -> String {
    (0..n).map(|i| format!("tests/test_app.py::test_case_{i} PASSED [{:>3}%]\n", (i + 1) * 100 / n)).collect()
}

fn app_py(edited: bool) -> String {
    let line = |i: usize| match (edited, i) {
        (true, 7) => "def f7(x):\n    return x * 7  # fixed: was x + 7\n".to_string(),
        (true, 21) => "def f21(x):\n    raise ValueError('f21 takes no input')\n".to_string(),
        _ => format!("def f{i}(x):\n    return x + {i}\n"),
    };
    (0..30).map(line).collect()
}

/// The session Gemini CLI's `-p` run makes: a test run, the same run
/// again, a file read, then the file read again after an edit.
fn session() -> Vec<Turn> {
    vec![
        shell("python check.py", &log(60)),
        shell("python check.py", &log(60)),
        read("/work/app.py", &app_py(false)),
        shell("sed -i 's/x + 7/x * 7/' app.py", ""),
        read("/work/app.py", &app_py(true)),
    ]
}

fn proxy(dir: &std::path::Path, budget: Option<Budget>) -> Proxy {
    let mut cfg = ServeConfig::for_tests("http://127.0.0.1:9");
    cfg.store = arc_store::StoreSpec::Dir(dir.join("arc"));
    cfg.run = Some("gemini".into());
    cfg.engine.recall = lam_core::stub::Recall::Via("mcp_lam_recall");
    cfg.engine.budget = budget;
    Proxy::open(cfg).unwrap()
}

/// One conversation, one session; every earlier item forwarded byte for
/// byte; the repeated test run becomes a stub whose id recalls the exact
/// output; every line the edit changed reaches the model.
#[test]
fn gemini_cli_repeats_become_stubs_and_new_lines_reach_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let p = proxy(dir.path(), None);
    let turns = session();
    let mut before: Vec<String> = Vec::new();
    let mut last = Vec::new();
    for n in 1..=turns.len() {
        let r = p.try_rewrite(Api::Gemini, None, &request(&turns[..n])).unwrap();
        assert!(r.conversation.is_some(), "request {n} is a conversation");
        let now = contents(&r.body);
        assert_eq!(now[..before.len()], before[..], "request {n}: earlier items forwarded byte for byte");
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        let sent: Value = serde_json::from_slice(&request(&turns[..n])).unwrap();
        assert_eq!((&v["systemInstruction"], &v["tools"]), (&sent["systemInstruction"], &sent["tools"]), "the preamble goes as sent");
        before = now;
        last = r.body;
    }
    let st = p.stats();
    assert_eq!(st.sessions_created, 1, "one conversation, one session");
    assert_eq!(st.requests.get("gemini"), Some(&5));
    assert_eq!(st.sessions[0].observations, 5, "every result admitted once");
    let out = outputs(&last);
    assert_eq!(out[0], turns[0].output, "the first run goes whole");
    assert!(out[1].starts_with("[lam: same output as last time; mcp_lam_recall §"), "{}", out[1]);
    let id = out[1].split('§').nth(1).unwrap().split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap();
    assert_eq!(p.recall(id).unwrap(), turns[1].output.as_bytes(), "§{id} recalls the exact output");
    assert_eq!(out[2], turns[2].output);
    for line in ["    return x * 7  # fixed: was x + 7", "    raise ValueError('f21 takes no input')"] {
        assert!(out[4].contains(line), "the changed line `{line}` reaches the model: {}", out[4]);
    }
    assert!(out[4].len() < turns[4].output.len(), "the unchanged lines of the re-read were compacted");
    for stub in lam_core::stub::parse_residual(out[4].as_bytes()).unwrap() {
        assert_eq!(p.recall(stub.id()).unwrap(), turns[4].output.as_bytes());
    }
}

/// What Gemini CLI sends that is not a conversation of its tools: a
/// conversation whose system prompt differs (the routing classifier, a
/// compression call) is another session; a result of the recall tool
/// goes whole even when it repeats an earlier output.
#[test]
fn the_recall_tool_s_result_goes_whole_and_another_preamble_is_another_session() {
    let dir = tempfile::tempdir().unwrap();
    let p = proxy(dir.path(), None);
    let mut turns = session();
    turns.truncate(1);
    let first = p.try_rewrite(Api::Gemini, None, &request(&turns)).unwrap();
    let out = turns[0].output.clone();
    turns.push(Turn { tool: "mcp_lam_recall", args: json!({"id": "a1b2c3d4"}), output: out.clone() });
    let second = p.try_rewrite(Api::Gemini, None, &request(&turns)).unwrap();
    assert_eq!(second.conversation, first.conversation);
    assert_eq!(outputs(&second.body)[1], out, "the recalled bytes reach the model as recalled");
    let mut other: Value = serde_json::from_slice(&request(&turns)).unwrap();
    other["systemInstruction"] = json!({"parts": [{"text": "You are a routing classifier."}]});
    let r = p.try_rewrite(Api::Gemini, None, &serde_json::to_vec(&other).unwrap()).unwrap();
    assert!(r.conversation.is_some() && r.conversation != first.conversation, "another system prompt, another session");
}

/// Gemini CLI's output `n` of a budget run: distinct lines (~1000 tokens).
fn listing(k: usize) -> String {
    (0..40).map(|i| format!("src/module_{k}/file_{i}.py:{}: def handler_{k}_{i}(request, *args):\n", i * 7 + k)).collect()
}

/// Under a budget, old `functionResponse` outputs are cited (the cut's
/// bytes frozen: the prefix changes once per cut at most), every request
/// stays within it, and each cited id recalls the exact output.
#[test]
fn a_budget_cites_old_outputs_that_recall_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let p = proxy(dir.path(), Some(Budget::new(8000, Some(4000), Some(2)).unwrap()));
    let turns: Vec<Turn> = (0..14).map(|k| read(&format!("/work/src/module_{k}.py"), &listing(k))).collect();
    let mut sent = Vec::new();
    for n in 1..=turns.len() {
        let r = p.try_rewrite(Api::Gemini, None, &request(&turns[..n])).unwrap();
        let tokens = lam_tokens::count(&r.body);
        assert!(tokens <= 8000 + 2 * n + 8, "request {n}: {tokens} tokens forwarded, over the budget");
        sent.push(r.body);
    }
    let st = p.stats().total();
    assert!(st.cuts >= 2 && st.citations >= 6 && st.over_budget == 0, "{st:?}");
    let changed = sent.windows(2).filter(|w| !contents(&w[1]).starts_with(&contents(&w[0]))).count();
    assert!(changed as u64 <= st.cuts, "{changed} prefix changes for {} cuts", st.cuts);
    let out = outputs(sent.last().unwrap());
    let cited: Vec<(usize, &String)> = out.iter().enumerate().filter(|(_, o)| o.starts_with("[lam: cited")).collect();
    assert_eq!(cited.len() as u64, st.citations);
    assert!(out[out.len() - 2..].iter().all(|o| !o.starts_with("[lam: cited")), "the newest 2 are kept");
    for (k, c) in cited {
        let rest = c.strip_prefix("[lam: cited to keep the context within its budget] `").expect(c);
        assert!(rest.starts_with(&format!("/work/src/module_{k}.py` → §")), "the citation names its call: {c}");
        assert!(c.contains("mcp_lam_recall §"), "{c}");
        let id = rest.split('§').nth(1).unwrap().split(' ').next().unwrap();
        assert_eq!(p.recall(id).unwrap(), listing(k).into_bytes(), "§{id} recalls output {k} exactly");
    }
    // A proxy that saw none of the earlier requests forwards the same bytes.
    drop(p);
    let fresh = proxy(dir.path(), Some(Budget::new(8000, Some(4000), Some(2)).unwrap()));
    assert_eq!(&fresh.try_rewrite(Api::Gemini, None, &request(&turns)).unwrap().body, sent.last().unwrap());
}

/// What the Gemini upstream stub saw.
#[derive(Debug, Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, axum::http::HeaderMap, Bytes)>>>);

/// The Gemini API's answers: SSE `data:` chunks (`\r\n\r\n` apart) for
/// `:streamGenerateContent?alt=sse`, one JSON `GenerateContentResponse`
/// for `:generateContent`, a `totalTokens` for `:countTokens`; each with
/// `usageMetadata` counting 3 prompt tokens per 10 bytes of the body.
async fn gemini_upstream(State(seen): State<Seen>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let pq = parts.uri.path_and_query().map_or(String::new(), |p| p.to_string());
    seen.0.lock().unwrap().push((pq.clone(), parts.headers, body.clone()));
    let prompt = body.len() * 3 / 10;
    let usage =
        |out: usize| json!({"promptTokenCount": prompt, "cachedContentTokenCount": prompt / 2, "candidatesTokenCount": out, "totalTokenCount": prompt + out});
    let chunk = |text: &str, out: usize| json!({"candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}], "usageMetadata": usage(out), "modelVersion": "gemini-3.1-pro-preview"});
    if pq.contains(":countTokens") {
        return ([(header::CONTENT_TYPE, "application/json")], json!({"totalTokens": prompt}).to_string()).into_response();
    }
    if pq.contains(":streamGenerateContent") && pq.contains("alt=sse") {
        let sse = format!("data: {}\r\n\r\ndata: {}\r\n\r\n", chunk("Done", 1), chunk(".", 2));
        return ([(header::CONTENT_TYPE, "text/event-stream")], sse).into_response();
    }
    if pq.contains(":streamGenerateContent") {
        // Without `alt=sse`: one JSON array whose elements come as they are made.
        let array = format!("[{}\r\n,\r\n{}\r\n]", chunk("Done", 1), chunk(".", 2));
        return ([(header::CONTENT_TYPE, "application/json")], array).into_response();
    }
    ([(header::CONTENT_TYPE, "application/json")], chunk("Done.", 2).to_string()).into_response()
}

/// The scripted Gemini upstream on a free port, noting what reaches it in
/// `seen`, and `lam serve` (budget 100,000) in front of it.
async fn proxy_to_gemini(seen: &Seen) -> support::Running {
    let app = axum::Router::new().fallback(gemini_upstream).with_state(seen.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    let mut cfg = ServeConfig::for_tests(&format!("http://{up}"));
    cfg.engine.budget = Some(Budget::new(100_000, None, None).unwrap());
    support::start_proxy(cfg)
}

/// `lam serve` answers the Gemini API: `:streamGenerateContent?alt=sse` and
/// `:generateContent` compacted (path, query and `x-goog-api-key` reach the
/// upstream as sent), the usage of SSE and JSON answers read, and
/// `:countTokens` passed through unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lam_serve_answers_the_gemini_api() {
    let seen = Seen::default();
    let mut run = proxy_to_gemini(&seen).await;
    let base = format!("http://{}/v1beta/models/gemini-3.1-pro-preview", run.addr);
    let c = reqwest::Client::new();
    let turns = session();
    let post = |url: String, body: Vec<u8>| c.post(url).header("x-goog-api-key", "AIza-test").header("content-type", "application/json").body(body).send();
    for n in 1..=2 {
        let r = post(format!("{base}:streamGenerateContent?alt=sse"), request(&turns[..n])).await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("x-lam-session").is_some(), "a compacted request");
        assert!(r.text().await.unwrap().starts_with("data: {\"candidates\""), "the stream comes back as sent");
    }
    let r = post(format!("{base}:generateContent"), request(&turns[..3])).await.unwrap();
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["usageMetadata"]["candidatesTokenCount"], 2);
    let counted = request(&turns[..2]);
    let r = post(format!("{base}:countTokens"), counted.clone()).await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers().get("x-lam-session").is_none()), (200, true), "countTokens is no conversation");
    let got = seen.0.lock().unwrap().clone();
    let paths: Vec<&str> = got.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse",
            "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse",
            "/v1beta/models/gemini-3.1-pro-preview:generateContent",
            "/v1beta/models/gemini-3.1-pro-preview:countTokens",
        ]
    );
    assert!(got.iter().all(|(_, h, _)| h["x-goog-api-key"] == "AIza-test"), "the key reaches the upstream");
    assert!(outputs(&got[1].2)[1].starts_with("[lam: same output as last time"), "the repeated run went as a stub");
    assert_eq!(contents(&got[2].2)[..5], contents(&got[1].2)[..], "earlier items byte-identical across the two routes");
    assert_eq!(got[3].2, counted, ":countTokens passed through as it came");
    let st = run.proxy.stats();
    assert_eq!((st.sessions_created, st.requests.get("gemini"), st.passthrough), (1, Some(&3), 1));
    assert_eq!(st.sessions[0].upstream_input_tokens as usize, got[2].2.len() * 3 / 10, "the JSON answer's promptTokenCount");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

/// The stable API version's path, `/v1/models/MODEL:generateContent`, is
/// the same API: compacted, and forwarded on the path it came on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stable_v1_path_is_compacted_too() {
    let seen = Seen::default();
    let mut run = proxy_to_gemini(&seen).await;
    let url = format!("http://{}/v1/models/gemini-3.1-pro-preview:generateContent", run.addr);
    let c = reqwest::Client::new();
    let turns = session();
    for n in 1..=2 {
        let r = c.post(&url).header("content-type", "application/json").body(request(&turns[..n])).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("x-lam-session").is_some(), "a compacted request");
    }
    let got = seen.0.lock().unwrap().clone();
    assert!(got.iter().all(|(p, _, _)| p == "/v1/models/gemini-3.1-pro-preview:generateContent"), "forwarded on the path it came on");
    assert!(outputs(&got[1].2)[1].starts_with("[lam: same output as last time"), "the repeated run went as a stub");
    assert_eq!(run.proxy.stats().requests.get("gemini"), Some(&2));
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

/// The SSE answer's `usageMetadata` is read as it streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sse_answer_s_usage_is_read() {
    let seen = Seen::default();
    let mut run = proxy_to_gemini(&seen).await;
    let url = format!("http://{}/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse", run.addr);
    let r = reqwest::Client::new().post(url).header("x-goog-api-key", "k").body(request(&session()[..1])).send().await.unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    assert_eq!(text.matches("data: ").count(), 2);
    let sent = seen.0.lock().unwrap()[0].2.len();
    let st = run.proxy.stats();
    assert_eq!(st.sessions[0].upstream_input_tokens as usize, sent * 3 / 10, "promptTokenCount, its cached part not added again");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

/// The JSON-array stream (`:streamGenerateContent` without `alt=sse`): its
/// `usageMetadata` is read too (issue 68).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_array_stream_s_usage_is_read() {
    let seen = Seen::default();
    let mut run = proxy_to_gemini(&seen).await;
    let url = format!("http://{}/v1beta/models/gemini-3.8-flash:streamGenerateContent", run.addr);
    let r = reqwest::Client::new().post(url).header("x-goog-api-key", "k").body(request(&session()[..1])).send().await.unwrap();
    assert!(r.text().await.unwrap().starts_with("[{\"candidates\""));
    let sent = seen.0.lock().unwrap()[0].2.len();
    assert_eq!(run.proxy.stats().sessions[0].upstream_input_tokens as usize, sent * 3 / 10, "promptTokenCount of the array's elements");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}

/// A body holding the conversation twice (`contents`, and `c\u006fntents`,
/// which a JSON reader takes for the same name), or the system instruction
/// under both its names, is refused before anything goes upstream: one
/// list compacted and archived, the other whole and unarchived, would be
/// ambiguous (issue 68).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_given_twice_is_refused() {
    let seen = Seen::default();
    let mut run = proxy_to_gemini(&seen).await;
    let url = format!("http://{}/v1beta/models/gemini-3.8-flash:generateContent", run.addr);
    let one = String::from_utf8(request(&session()[..2])).unwrap();
    let contents = one.find("\"contents\"").unwrap();
    let twice = format!("{}\"c\\u006fntents\":[],{}", &one[..contents], &one[contents..]);
    let system = one.replacen('{', r#"{"systemInstruction":{"parts":[{"text":"a"}]},"system_instruction":{"parts":[{"text":"b"}]},"#, 1);
    for (body, member) in [(twice, "contents"), (system, "systemInstruction")] {
        let r = reqwest::Client::new().post(&url).header("content-type", "application/json").body(body).send().await.unwrap();
        assert_eq!(r.status(), 400);
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["type"], "lam_duplicate_key", "{e}");
        assert!(e["error"]["message"].as_str().unwrap().contains(member), "{e}");
    }
    assert!(seen.0.lock().unwrap().is_empty(), "nothing went upstream");
    run.stop.take().unwrap().send(()).unwrap();
    run.done.await.unwrap().unwrap();
}
