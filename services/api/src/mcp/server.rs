//! The MCP server: `tools/list` filtered by the caller's access, `tools/call` as an
//! in-process request to the REST operation, and each instance's record and recent chats
//! as resources.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::Router;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use tower::ServiceExt;

use super::tools::{self, Built, Catalog, ToolDef, TOOLS};
use super::TOOL_CALLS;
use door::extract::Principal;
use door::AppState;

/// The largest answer a tool reads from its operation.
const ANSWER_LIMIT: usize = 8 * 1024 * 1024;
/// How often `send_message` with `wait` reports progress while it waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

const INSTRUCTIONS: &str = "paceline operates messaging accounts (instances, e.g. WhatsApp accounts). Find the \
    instance with list_instances, check its state with get_instance (it must be `connected` to send), then use \
    send_message: every send goes through the instance's paced queue, so it may wait its turn. Follow a message \
    with get_message. A tool that fails answers isError with the API's error code (e.g. invalid_number, \
    rate_limited, instance_not_connected) and a message saying what to change.";

#[derive(Clone)]
pub struct McpServer {
    state: AppState,
    api: Router,
    tools: Arc<Catalog>,
}

/// The authenticated caller and the HTTP request that carried the MCP message.
struct Caller<'a> {
    principal: &'a Principal,
    parts: &'a Parts,
}

impl<'a> Caller<'a> {
    fn of(ctx: &'a RequestContext<RoleServer>) -> Result<Caller<'a>, ErrorData> {
        let parts = ctx.extensions.get::<Parts>().ok_or_else(|| ErrorData::internal_error("no HTTP request", None))?;
        let principal =
            parts.extensions.get::<Principal>().ok_or_else(|| ErrorData::internal_error("not authenticated", None))?;
        Ok(Caller { principal, parts })
    }
}

/// A REST operation's answer.
/// A tool call whose operation failed: the API's error.
struct ToolError {
    code: String,
    message: String,
    retryable: bool,
}

struct Answer {
    status: StatusCode,
    body: Value,
}

impl McpServer {
    pub fn new(state: AppState, api: Router, tools: Arc<Catalog>) -> McpServer {
        McpServer { state, api, tools }
    }

    /// Calls `method path` through the router, as the caller: its token, its address,
    /// its request id.
    async fn call(&self, caller: &Caller<'_>, method: &str, uri: &str, body: Option<Value>) -> Answer {
        let mut req = axum::http::Request::builder().method(method.parse::<Method>().unwrap_or(Method::GET)).uri(uri);
        let headers = req.headers_mut().expect("a fresh builder");
        let client_ip_header = self.state.config.api.client_ip_header.as_str();
        for (name, value) in &caller.parts.headers {
            let copy =
                name == header::AUTHORIZATION || name.as_str() == "x-request-id" || name.as_str() == client_ip_header;
            if copy {
                headers.append(name.clone(), value.clone());
            }
        }
        let body = match body {
            Some(b) => {
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                Body::from(serde_json::to_vec(&b).unwrap_or_default())
            }
            None => Body::empty(),
        };
        let mut req = match req.body(body) {
            Ok(r) => r,
            Err(_) => return Answer::error(StatusCode::BAD_REQUEST, "validation_failed", "a parameter is not valid"),
        };
        if let Some(ci) = caller.parts.extensions.get::<ConnectInfo<SocketAddr>>() {
            req.extensions_mut().insert(*ci);
        }
        let res = match self.api.clone().oneshot(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let status = res.status();
        let body = match axum::body::to_bytes(res.into_body(), ANSWER_LIMIT).await {
            Ok(b) if b.is_empty() => json!({}),
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|_| json!({ "text": String::from_utf8_lossy(&b) })),
            Err(_) => return Answer::error(StatusCode::BAD_GATEWAY, "internal", "the answer was too large"),
        };
        Answer { status, body }
    }

    /// Runs a tool: its arguments become the operation's path, query and body.
    async fn run(
        &self,
        caller: &Caller<'_>,
        def: &ToolDef,
        built: &Built,
        mut args: Map<String, Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ToolError> {
        let invalid = |m: String| ToolError { code: "validation_failed".into(), message: m, retryable: false };
        let (method, path) = tools::route_for(def, caller.principal);
        let instance = match args.remove("instance_id") {
            Some(Value::String(s)) => Some(s),
            Some(_) => return Err(invalid("instance_id must be a string".into())),
            None => caller.principal.own_instance().map(|id| id.to_string()),
        };
        let mut url = url::Url::parse("http://mcp.invalid/").expect("a base URL");
        {
            let mut segments = url.path_segments_mut().expect("a base URL");
            segments.clear();
            for seg in path.trim_start_matches('/').split('/') {
                let value = match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some("id") => instance.clone().ok_or_else(|| {
                        invalid("instance_id is required with the admin token (list_instances shows the ids)".into())
                    })?,
                    Some(name) => match args.remove(name) {
                        Some(Value::String(s)) if !s.is_empty() => s,
                        Some(Value::Number(n)) => n.to_string(),
                        _ => return Err(invalid(format!("{name} is required (a string)"))),
                    },
                    None => seg.to_string(),
                };
                segments.push(&value);
            }
        }
        let mut wait = false;
        {
            let mut query = url.query_pairs_mut();
            for p in built.params.iter().filter(|p| !p.in_path) {
                let Some(v) = args.remove(&p.name) else { continue };
                let text = match v {
                    Value::String(s) => s,
                    Value::Null => continue,
                    Value::Bool(b) => b.to_string(),
                    Value::Number(n) => n.to_string(),
                    _ => return Err(invalid(format!("{} must be a string, number or boolean", p.name))),
                };
                wait |= p.name == "wait" && text == "true";
                query.append_pair(&p.name, &text);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        let body = match &built.body_fields {
            Some(fields) => {
                let body: Map<String, Value> =
                    fields.iter().filter_map(|f| args.remove(f).map(|v| (f.clone(), v))).collect();
                Some(Value::Object(body))
            }
            None => None,
        };
        if let Some(extra) = args.keys().next() {
            return Err(invalid(format!("unknown argument {extra:?}")));
        }
        let uri = &url[url::Position::BeforePath..];
        let answer = if wait {
            self.waiting(caller, method, uri, body, ctx).await
        } else {
            self.call(caller, method, uri, body).await
        };
        if !answer.status.is_success() {
            let e = &answer.body["error"];
            return Err(ToolError {
                code: e["code"].as_str().unwrap_or("internal").to_string(),
                message: e["message"].as_str().unwrap_or("the call failed").to_string(),
                retryable: e["retryable"].as_bool().unwrap_or(false),
            });
        }
        let mut body = answer.body;
        if def.name == "list_instances" && caller.principal.own_instance().is_some() {
            body = json!({ "instances": [body] });
        }
        let mut result = CallToolResult::structured(body.clone());
        if def.name == "get_qr" {
            if let Some(png) = body["base64"].as_str().and_then(|d| d.strip_prefix("data:image/png;base64,")) {
                result.content = vec![
                    ContentBlock::text(format!(
                        "Scan this QR code with the phone (WhatsApp > Linked devices). Payload: {}",
                        body["code"].as_str().unwrap_or_default()
                    )),
                    ContentBlock::image(png.to_string(), "image/png"),
                ];
            }
        }
        Ok(result)
    }

    /// A call that waits (`send_message` with `wait`): when the client asked for progress,
    /// a notification at once and every few seconds while it waits (the answer is then an
    /// event stream).
    async fn waiting(
        &self,
        caller: &Caller<'_>,
        method: &str,
        uri: &str,
        body: Option<Value>,
        ctx: &RequestContext<RoleServer>,
    ) -> Answer {
        let call = self.call(caller, method, uri, body);
        let Some(token) = ctx.meta.get_progress_token() else { return call.await };
        tokio::pin!(call);
        let started = tokio::time::Instant::now();
        // The first report goes at once: the client then reads an event stream.
        let mut tick = tokio::time::interval(PROGRESS_EVERY);
        loop {
            tokio::select! {
                answer = &mut call => return answer,
                _ = tick.tick() => {
                    let waited = started.elapsed().as_secs();
                    let note = ProgressNotificationParam::new(token.clone(), waited as f64)
                        .with_message(format!("waiting for the send to finish ({waited} s)"));
                    let _ = ctx.peer.notify_progress(note).await;
                }
            }
        }
    }

    fn tool(&self, def: &ToolDef) -> Tool {
        let built = &self.tools.tools[def.name];
        let mut annotations = ToolAnnotations::with_title(def.title).read_only(def.read_only);
        if !def.read_only {
            annotations = annotations.destructive(false);
        }
        Tool::new(def.name, def.description, Arc::new(built.input_schema.clone()))
            .with_title(def.title)
            .with_raw_output_schema(Arc::new(built.output_schema.clone()))
            .with_annotations(annotations)
    }

    /// The instances whose resources the caller sees: its own, or (admin) the first page.
    async fn resource_instances(&self, caller: &Caller<'_>) -> Vec<Value> {
        // The resources are what `list_instances` reads: visible to the same tokens.
        let visible = TOOLS.iter().any(|d| d.name == "list_instances" && tools::visible(d, caller.principal));
        if !visible {
            return Vec::new();
        }
        let uri = match caller.principal.own_instance() {
            Some(id) => format!("/v1/instances/{id}"),
            None => "/v1/instances?limit=100".to_string(),
        };
        let answer = self.call(caller, "GET", &uri, None).await;
        if !answer.status.is_success() {
            return Vec::new();
        }
        match caller.principal.own_instance() {
            Some(_) => vec![answer.body],
            None => answer.body["instances"].as_array().cloned().unwrap_or_default(),
        }
    }
}

impl Answer {
    fn error(status: StatusCode, code: &str, message: &str) -> Answer {
        Answer { status, body: json!({ "error": { "code": code, "message": message } }) }
    }
}

/// `paceline://instances/{id}` and `paceline://instances/{id}/chats`.
fn resource_route(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("paceline://instances/")?;
    let (id, tail) = rest.split_once('/').unwrap_or((rest, ""));
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    match tail {
        "" => Some(format!("/v1/instances/{id}")),
        "chats" => Some(format!("/v1/instances/{id}/chats?limit=20")),
        _ => None,
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("paceline", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let caller = Caller::of(&ctx)?;
        let tools = TOOLS.iter().filter(|d| tools::visible(d, caller.principal)).map(|d| self.tool(d)).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = Caller::of(&ctx)?;
        let found = self.tools.get(&request.name).filter(|(def, _)| tools::visible(def, caller.principal));
        let Some((def, built)) = found else {
            metrics::counter!(TOOL_CALLS, "tool" => "unknown", "result" => "unknown_tool").increment(1);
            return Err(ErrorData::invalid_params(format!("no tool named {:?} for this token", request.name), None));
        };
        let result = match self.run(&caller, def, built, request.arguments.unwrap_or_default(), &ctx).await {
            Ok(r) => {
                metrics::counter!(TOOL_CALLS, "tool" => def.name, "result" => "ok").increment(1);
                r
            }
            Err(e) => {
                metrics::counter!(TOOL_CALLS, "tool" => def.name, "result" => e.code.clone()).increment(1);
                // isError, with the error structured as the tool's output schema allows
                // (its answer, or this): clients that check results against the schema
                // (the TypeScript SDK does, errors included) take it.
                let text = format!("{}: {}", e.code, e.message);
                let mut r = CallToolResult::structured_error(
                    json!({ "error": { "code": e.code, "message": e.message, "retryable": e.retryable } }),
                );
                r.content = vec![ContentBlock::text(text)];
                r
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let caller = Caller::of(&ctx)?;
        let mut resources = Vec::new();
        for inst in self.resource_instances(&caller).await {
            let (Some(id), Some(name)) = (inst["id"].as_str(), inst["name"].as_str()) else { continue };
            resources.push(
                Resource::new(format!("paceline://instances/{id}"), format!("instance {name}"))
                    .with_description("The instance's record: state, phone, pacing.")
                    .with_mime_type("application/json"),
            );
            resources.push(
                Resource::new(format!("paceline://instances/{id}/chats"), format!("instance {name}: recent chats"))
                    .with_description("The instance's 20 most recent chats.")
                    .with_mime_type("application/json"),
            );
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = Caller::of(&ctx)?;
        let not_found = || ErrorData::resource_not_found(format!("no resource {:?}", request.uri), None);
        let path = resource_route(&request.uri).ok_or_else(not_found)?;
        let answer = self.call(&caller, "GET", &path, None).await;
        if !answer.status.is_success() {
            return Err(not_found());
        }
        let text = serde_json::to_string_pretty(&answer.body).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, request.uri.clone()).with_mime_type("application/json")
        ])
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::resource_route;

    #[test]
    fn resource_uris_name_only_the_two_reads() {
        assert_eq!(resource_route("paceline://instances/inst_abc").as_deref(), Some("/v1/instances/inst_abc"));
        assert_eq!(
            resource_route("paceline://instances/inst_abc/chats").as_deref(),
            Some("/v1/instances/inst_abc/chats?limit=20")
        );
        for bad in ["paceline://instances/", "paceline://instances/a/../b", "paceline://instances/x/y", "http://x"] {
            assert_eq!(resource_route(bad), None, "{bad}");
        }
    }
}
