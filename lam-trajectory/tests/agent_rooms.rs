//! One room per agent: no Rust code under a `src/` of the workspace names an
//! agent outside the rooms (`lam-trajectory/src/agents/`). Generic code asks
//! the room (`lam_trajectory::agents::Agent`) instead.
//!
//! What counts: an identifier or a string literal of code that contains an
//! agent's name, in any case and with `-`, `_` and spaces ignored:
//! `claude`, `codex`, `opencode`, `geminicli` (so `ClaudeCode`,
//! `claude_flags`, `"codex"`, `OpenCode`, `"gemini-cli"`, `GeminiCli` all
//! count). Gemini alone is not counted: it is also the name of an API
//! (`lam_core::wire::Api::Gemini`, Google's `generateContent`), and the API
//! shapes live outside the rooms by design, once per API; Gemini CLI's
//! program name `gemini` belongs in its room.
//!
//! What does not, and why:
//! - comments (`//`, `///`, `//!`, `/* */`): they cite where a rule came
//!   from ("Claude Code's `12→` line numbers"), which is provenance, not
//!   code that acts on an agent;
//! - `#[cfg(test)]` items, and the files such a `mod NAME;` declares: tests
//!   drive code with real data (real model names such as
//!   `claude-sonnet-4-5`, real transcripts);
//! - [`EXCEPTIONS`]: each with its reason.

use std::path::{Path, PathBuf};

/// The rooms: every file under this directory may name agents.
const ROOMS: &str = "lam-trajectory/src/agents/";

/// Code outside the rooms that names an agent on purpose: (file, the
/// literal or identifier, why).
/// None today.
const EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// Agents' names as they are matched: lower case, without `-`, `_` or spaces.
const NAMES: [&str; 4] = ["claude", "codex", "opencode", "geminicli"];

#[test]
fn no_code_outside_the_rooms_names_an_agent() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf();
    let mut files = Vec::new();
    for dir in source_dirs(&root) {
        rust_files(&dir, &mut files);
    }
    assert!(files.len() > 50, "found only {} source files under {}", files.len(), root.display());
    let mut found = Vec::new();
    let skipped = test_modules(&files);
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f).to_string_lossy().replace('\\', "/");
        if rel.starts_with(ROOMS) || skipped.contains(f) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{rel}: {e}"));
        for (line, token) in named_agents(&text) {
            if !EXCEPTIONS.iter().any(|(file, t, _)| *file == rel && *t == token) {
                found.push(format!("{rel}:{line}: {token}"));
            }
        }
    }
    assert!(found.is_empty(), "agents named outside the rooms ({ROOMS}); ask the room instead:\n{}", found.join("\n"));
}

#[test]
fn the_scanner_sees_code_and_skips_comments_and_tests() {
    let src = r##"
// Claude Code writes this.
/* codex */ fn f() { let claude_flags = 1; let s = "http://x//codex"; let c = '"'; }
let r = r#"opencode "quoted""#;
let life: &'static str = "ok";
#[cfg(test)]
mod tests { fn g() { let codex = "gemini-cli"; } }
fn after() -> &'static str { "Gemini-CLI" }
fn api() -> Api { Api::Gemini }
"##;
    let got: Vec<(usize, String)> = named_agents(src);
    let tokens: Vec<&str> = got.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(tokens, ["claude_flags", "\"http://x//codex\"", "r#\"opencode \"quoted\"\"#", "\"Gemini-CLI\""]);
    assert_eq!(got[0].0, 3);
}

/// The `src` directories of the workspace's crates (and their nested
/// crates: fuzz targets, benches' helpers), not the build's output.
fn source_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let skip = name.starts_with('.') || ["target", "node_modules", "shared"].contains(&name.as_str());
            if skip || !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if name == "src" {
                out.push(e.path());
            } else if depth < 3 {
                stack.push((e.path(), depth + 1));
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The files that `#[cfg(test)] mod NAME;` declarations point at.
fn test_modules(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        let toks = tokens(&text);
        for w in toks.windows(10) {
            let t: Vec<&str> = w.iter().map(|t| t.text.as_str()).collect();
            if t[..7] == ["#", "[", "cfg", "(", "test", ")", "]"] && t[7] == "mod" && t[9] == ";" {
                let dir = match f.file_stem().and_then(|s| s.to_str()) {
                    Some("mod" | "lib" | "main") => f.parent().map(Path::to_path_buf),
                    Some(stem) => f.parent().map(|p| p.join(stem)),
                    None => None,
                };
                if let Some(d) = dir {
                    out.push(d.join(format!("{}.rs", t[8])));
                    out.push(d.join(t[8]).join("mod.rs"));
                }
            }
        }
    }
    out
}

/// The identifiers and string literals of `src`'s code (comments and
/// `#[cfg(test)]` items left out) that name an agent, with their lines.
fn named_agents(src: &str) -> Vec<(usize, String)> {
    let toks = tokens(src);
    let mut out = Vec::new();
    let mut k = 0;
    while k < toks.len() {
        let t: Vec<&str> = toks[k..(k + 7).min(toks.len())].iter().map(|t| t.text.as_str()).collect();
        if t == ["#", "[", "cfg", "(", "test", ")", "]"] {
            k = skip_item(&toks, k + 7);
            continue;
        }
        let tok = &toks[k];
        let plain: String = tok.text.chars().filter(|c| !matches!(c, '-' | '_' | ' ')).collect::<String>().to_ascii_lowercase();
        if tok.word && NAMES.iter().any(|n| plain.contains(n)) {
            out.push((tok.line, tok.text.clone()));
        }
        k += 1;
    }
    out
}

/// The token after the item starting at `k`: up to a `;` or the end of its
/// first `{...}` block at depth 0.
fn skip_item(toks: &[Token], mut k: usize) -> usize {
    let mut depth = 0usize;
    while k < toks.len() {
        match toks[k].text.as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return k + 1;
                }
            }
            ";" if depth == 0 => return k + 1,
            _ => {}
        }
        k += 1;
    }
    k
}

/// One token: an identifier, a string literal (`word`), or a punctuation character.
struct Token {
    text: String,
    line: usize,
    word: bool,
}

/// Rust source as tokens, comments dropped: identifiers, string literals
/// (plain, byte, raw with any number of `#`), char literals and lifetimes
/// (dropped), and single punctuation characters.
fn tokens(src: &str) -> Vec<Token> {
    let b: Vec<char> = src.chars().collect();
    let (mut out, mut i, mut line) = (Vec::new(), 0, 1);
    let at = |i: usize| b.get(i).copied().unwrap_or('\0');
    while i < b.len() {
        let c = b[i];
        let start = (i, line);
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && at(i + 1) == '/' {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            i += 2;
            while i < b.len() && !(b[i] == '*' && at(i + 1) == '/') {
                line += usize::from(b[i] == '\n');
                i += 1;
            }
            i += 2;
        } else if let Some(end) = raw_string_end(&b, i) {
            line += b[i..end].iter().filter(|&&c| c == '\n').count();
            out.push(Token { text: b[i..end].iter().collect(), line: start.1, word: true });
            i = end;
        } else if c == '"' || (c == 'b' && at(i + 1) == '"') {
            i += if c == 'b' { 2 } else { 1 };
            while i < b.len() && b[i] != '"' {
                line += usize::from(b[i] == '\n');
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(Token { text: b[start.0..i.min(b.len())].iter().collect(), line: start.1, word: true });
        } else if c == '\'' {
            // A char literal ('x', '\n', '\''), else a lifetime or label.
            if at(i + 1) == '\\' {
                i += 3;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphanumeric() || c == '_' {
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(Token { text: b[start.0..i].iter().collect(), line, word: true });
        } else {
            out.push(Token { text: c.to_string(), line, word: false });
            i += 1;
        }
    }
    out
}

/// The end of a raw string literal (`r"..."`, `r#"..."#`, `br#"..."#`) starting at `i`.
fn raw_string_end(b: &[char], i: usize) -> Option<usize> {
    let mut j = i + usize::from(b.get(i) == Some(&'b'));
    if b.get(j) != Some(&'r') || (i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_')) {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == '#').count();
    j += hashes;
    if b.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < b.len() {
        if b[j] == '"' && b[j + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes && b.len() >= j + 1 + hashes {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(b.len())
}
