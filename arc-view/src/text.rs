//! Small text helpers shared by the policies. Every rendered entry starts
//! with a non-whitespace marker and ends with `\n`, so with a BPE tokenizer
//! whose pre-tokenizer never joins a newline to a following `[`, `#` or `§`
//! (cl100k_base), the token count of a view is the sum of its entries' counts.

/// Lossy text of observation bytes for the prompt (U+FFFD for invalid bytes;
/// the archive keeps the exact bytes).
pub fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

pub use lam_core::cite::one_line;

/// Append `s` and make sure the result ends with a newline.
pub fn push_line_block(out: &mut String, s: &str) {
    out.push_str(s);
    if !out.ends_with('\n') {
        out.push('\n');
    }
}

/// The task prefix block: `[task]` and the task text, or nothing at all
/// when the trajectory has no task (no empty section).
pub fn task_block(task: &str) -> String {
    if task.trim().is_empty() {
        return String::new();
    }
    let mut s = String::from("[task]\n");
    push_line_block(&mut s, task);
    s
}

/// The verbatim form of a turn, as the model saw it when it happened.
pub fn verbatim(number: usize, id: Option<&str>, thought: &str, action: &str, observation: &str) -> String {
    let mut s = match id {
        Some(id) => format!("[turn {number} §{id}]\n"),
        None => format!("[turn {number}]\n"),
    };
    if !thought.trim().is_empty() {
        push_line_block(&mut s, thought.trim_end());
    }
    s.push_str("$ ");
    push_line_block(&mut s, action.trim_end());
    push_line_block(&mut s, observation);
    s
}
