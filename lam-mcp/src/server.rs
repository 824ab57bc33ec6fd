//! The MCP server: the three tools over an [`Archive`], with rmcp.

use crate::archive::{Archive, Error, Recalled};
use crate::quote;
use base64::Engine;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, Content, CustomRequest, CustomResult, ErrorCode, Implementation, RawContent, ResourceContents, ServerCapabilities,
    ServerInfo,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use std::sync::Arc;

/// A part selector: `"K"`, `"K/N"`, or the number `K`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PartArg {
    /// `"K"` or `"K/N"` (1-based; `N` must be the part count).
    Text(String),
    /// `K` (1-based).
    Number(u64),
}

impl PartArg {
    fn text(&self) -> String {
        match self {
            PartArg::Text(s) => s.clone(),
            PartArg::Number(n) => n.to_string(),
        }
    }
}

/// Arguments of `recall`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct RecallArgs {
    /// The id as cited: `§a1b2c3d4` (the `§` is optional).
    pub id: String,
    /// Session holding the id; needed only when sessions show the id for different observations.
    #[serde(default)]
    pub session: Option<String>,
    /// Part `K` or `K/N` (1-based) of the observation cut into parts of at most the server's part size in cl100k tokens; omitted: the whole observation.
    #[serde(default)]
    pub part: Option<PartArg>,
}

/// Arguments of `recall_meta`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct MetaArgs {
    /// The id as cited: `§a1b2c3d4` (the `§` is optional).
    pub id: String,
    /// Session holding the id; needed only when sessions show the id for different observations.
    #[serde(default)]
    pub session: Option<String>,
}

/// Arguments of `catalog`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
pub struct CatalogArgs {
    /// The session whose catalog to show; omitted (and the server not scoped to one session): the list of sessions.
    #[serde(default)]
    pub session: Option<String>,
    /// Page number, 1-based (default 1).
    #[serde(default)]
    pub page: Option<usize>,
}

/// The `lam` recall server: tools `recall`, `recall_meta` and `catalog`.
#[derive(Clone)]
pub struct RecallServer {
    archive: Arc<Archive>,
    tool_router: ToolRouter<RecallServer>,
}

impl std::fmt::Debug for RecallServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallServer").field("archive", &self.archive).finish_non_exhaustive()
    }
}

/// Run `work` on a blocking thread (stores do blocking I/O, and a
/// PostgreSQL store runs its own runtime) and turn its error into a tool error.
async fn blocking<R: Send + 'static>(
    archive: &Arc<Archive>,
    work: impl FnOnce(&Archive) -> Result<R, Error> + Send + 'static,
    answer: impl FnOnce(R) -> CallToolResult,
) -> Result<CallToolResult, ErrorData> {
    let a = archive.clone();
    Ok(match tokio::task::spawn_blocking(move || work(&a)).await {
        Ok(Ok(r)) => answer(r),
        Ok(Err(e)) => CallToolResult::error(vec![Content::text(e.to_string())]),
        Err(e) => CallToolResult::error(vec![Content::text(format!("internal error: the tool's task failed: {e}"))]),
    })
}

/// `recall`'s content: the text when the bytes are UTF-8; otherwise the
/// lossy text (U+FFFD for invalid bytes), a note, and the exact bytes as a
/// base64 blob resource.
pub fn recall_content(r: &Recalled) -> Vec<Content> {
    match std::str::from_utf8(&r.bytes) {
        Ok(s) => vec![Content::text(s)],
        Err(_) => {
            let what = match r.part {
                Some((k, m)) => format!("§{} part {k}/{m} (bytes {}..{} of {})", r.shown, r.range.start, r.range.end, r.total),
                None => format!("§{} ({} bytes)", r.shown, r.total),
            };
            let uri = match r.part {
                Some((k, m)) => format!("lam://obs/{}?part={k}/{m}", r.shown),
                None => format!("lam://obs/{}", r.shown),
            };
            let blob = base64::engine::general_purpose::STANDARD.encode(&r.bytes);
            vec![
                Content::text(String::from_utf8_lossy(&r.bytes)),
                Content::text(format!(
                    "[{what} is not valid UTF-8: the text above shows each invalid byte sequence as U+FFFD; the exact bytes follow as a base64 blob ({uri})]"
                )),
                Content::resource(ResourceContents::BlobResourceContents { uri, mime_type: Some("application/octet-stream".into()), blob, meta: None }),
            ]
        }
    }
}

/// `_meta` of `recall`: Claude Code lists the tool to the model from the
/// start instead of deferring it behind its tool search (2.1.x defers every
/// MCP tool by default; a stub's `mcp__lam__recall §id` must be callable as
/// written). Other clients ignore the key.
fn always_load() -> rmcp::model::Meta {
    let mut m = rmcp::model::Meta::new();
    m.0.insert("anthropic/alwaysLoad".into(), serde_json::Value::Bool(true));
    m
}

#[tool_router]
impl RecallServer {
    /// A server over `archive`.
    pub fn new(archive: Arc<Archive>) -> Self {
        Self { archive, tool_router: Self::tool_router() }
    }

    /// The exact archived text of an observation cited as §id, or one part of it.
    #[tool(
        meta = always_load(),
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "Recall the exact archived text of an observation cited as §id (from a stub `_recall §id` or the catalog). Without `part`: the whole observation; with `part` \"K\" or \"K/N\": part K of it (see recall_meta for the part count). Bytes that are not valid UTF-8 come back as text with U+FFFD plus the exact bytes as a base64 blob."
    )]
    async fn recall(&self, Parameters(a): Parameters<RecallArgs>) -> Result<CallToolResult, ErrorData> {
        let part = a.part.as_ref().map(PartArg::text);
        blocking(&self.archive, move |ar| ar.recall(&a.id, a.session.as_deref(), part.as_deref()), |r| CallToolResult::success(recall_content(&r))).await
    }

    /// Size, parts, sessions and first line of an observation.
    #[tool(
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "Metadata of an archived observation cited as §id: size in bytes and tokens, number of parts for `recall`, sessions holding it, action, return code, first line. JSON."
    )]
    async fn recall_meta(&self, Parameters(a): Parameters<MetaArgs>) -> Result<CallToolResult, ErrorData> {
        blocking(
            &self.archive,
            move |ar| ar.meta(&a.id, a.session.as_deref()),
            |m| {
                let json = serde_json::to_string_pretty(&m).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
                CallToolResult::success(vec![Content::text(json)])
            },
        )
        .await
    }

    /// One page of a session's citation catalog.
    #[tool(
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        description = "One page of a session's citation catalog: every archived observation of the session, one line each (`§id #step rc=N Ttok $ action`), in creation order, as the ARC view shows it. Without a session (on a server not scoped to one): the sessions in the archive."
    )]
    async fn catalog(&self, Parameters(a): Parameters<CatalogArgs>) -> Result<CallToolResult, ErrorData> {
        blocking(&self.archive, move |ar| ar.catalog(a.session.as_deref(), a.page), |t| CallToolResult::success(vec![Content::text(t)])).await
    }
}

/// An argument of the wrong type is answered with rmcp's "failed to
/// deserialize parameters" and serde's message, which quotes a string
/// argument whole (`invalid type: string "…", expected usize`): the text
/// between its first and last `"` is quoted by [`quote`].
fn quote_serde(mut r: CallToolResult) -> CallToolResult {
    if r.is_error != Some(true) {
        return r;
    }
    for c in &mut r.content {
        if let RawContent::Text(t) = &mut c.raw
            && t.text.starts_with("failed to deserialize parameters:")
            && let (Some(a), Some(b)) = (t.text.find('"'), t.text.rfind('"'))
            && a < b
        {
            t.text = format!("{}{}{}", &t.text[..=a], quote(&t.text[a + 1..b]), &t.text[b..]);
        }
    }
    r
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for RecallServer {
    async fn call_tool(&self, request: CallToolRequestParams, context: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        // Our own messages quote what the client sent already; serde's do not.
        self.tool_router.call(ToolCallContext::new(self, request, context)).await.map(quote_serde)
    }

    /// A method this server does not serve: rmcp's answer is the method
    /// itself; this one quotes it.
    async fn on_custom_request(&self, request: CustomRequest, _context: RequestContext<RoleServer>) -> Result<CustomResult, ErrorData> {
        Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, format!("method not found: `{}`", quote(&request.method)), None))
    }

    fn get_info(&self) -> ServerInfo {
        let scope = match &self.archive.config().session {
            Some(s) => format!(" This server is scoped to session `{s}`."),
            None => String::new(),
        };
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("lam", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Exact recall of agent tool observations archived by lam (LAM/ARC). Stubs and citations in the context name observations as §id; `recall` returns their exact text, `recall_meta` their size and part count, `catalog` lists a session's observations.{scope}"
            ))
    }
}
