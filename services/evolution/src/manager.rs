//! What Evolution Manager (Evolution's web UI) asks before and around the instance
//! routes: the root document it checks the server by, the credentials check it signs in
//! with, and the `find` routes of the integrations it has pages for. paceline has
//! webhooks (Evolution's `webhook/*`) and Chatwoot inboxes (`chatwoot/*`, in
//! `chatwoot.rs`), not Evolution's websocket, RabbitMQ, SQS or bot integrations: their
//! `find` answers that none is set (so the pages show empty, as for an instance without
//! one), and their `set` refuses with a reason.

use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::error::ErrorBody;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ActionAccess, ActionKey};
use door::extract::Path;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(root))
        .routes(routes!(verify_creds))
        .routes(routes!(integration_find))
        .routes(routes!(integration_set))
        .routes(routes!(bot_settings))
}

/// The Evolution API version whose routes paceline answers (what clients check
/// `version` against).
pub const EVOLUTION_VERSION: &str = "2.3.6";

/// Evolution's root document.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoRootOut {
    pub status: u16,
    pub message: String,
    /// The Evolution API version whose routes are answered.
    pub version: String,
    /// Who answers: `paceline`.
    pub client_name: String,
    /// paceline's own version.
    pub paceline_version: String,
    /// Where the API's description is.
    pub documentation: String,
}

/// Evolution's root document: what Evolution Manager (and other clients) check a server
/// by before signing in. Needs no key.
#[utoipa::path(get, path = "/", tag = "evolution", operation_id = "evolution_root",
    responses(
        (status = 200, description = "the server answers Evolution's routes", body = EvoRootOut),
        (status = 503, description = "`shutting_down`: the pod is draining; another answers", body = ErrorBody),
    ),
    security(()))]
async fn root() -> Json<EvoRootOut> {
    Json(EvoRootOut {
        status: 200,
        message: "Welcome to the Evolution API, it is working! (paceline)".into(),
        version: EVOLUTION_VERSION.into(),
        client_name: "paceline".into(),
        paceline_version: env!("CARGO_PKG_VERSION").into(),
        documentation: "/v1/openapi.json".into(),
    })
}

/// Answer of `POST /verify-creds`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvoCredsOut {
    pub status: u16,
    pub message: String,
}

/// Check a key, as Evolution Manager signs in: 200 for any valid key (the admin token is
/// Evolution's global key; an account token is its account's), 401 otherwise.
#[utoipa::path(post, path = "/verify-creds", tag = "evolution", operation_id = "evolution_verifyCreds",
    responses(
        (status = 200, description = "the key is valid", body = EvoCredsOut),
        (status = 401, description = "`unauthorized`: missing or invalid key", body = ErrorBody),
    ),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn verify_creds(_key: ActionKey) -> Json<EvoCredsOut> {
    Json(EvoCredsOut { status: 200, message: "Credentials are valid".into() })
}

/// The integrations Evolution Manager has pages for, which paceline does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
pub enum Integration {
    #[serde(rename = "websocket")]
    Websocket,
    #[serde(rename = "sqs")]
    Sqs,
    #[serde(rename = "typebot")]
    Typebot,
    #[serde(rename = "openai")]
    Openai,
    #[serde(rename = "dify")]
    Dify,
    #[serde(rename = "flowise")]
    Flowise,
    #[serde(rename = "evolutionBot")]
    EvolutionBot,
    #[serde(rename = "n8n")]
    N8n,
    #[serde(rename = "evoai")]
    Evoai,
}

impl Integration {
    fn is_bot(self) -> bool {
        !matches!(self, Integration::Websocket | Integration::Sqs)
    }

    /// Why it cannot be set, and what to use instead.
    fn refusal(self) -> &'static str {
        match self {
            Integration::Websocket => {
                "paceline has no websocket events: use a webhook (webhook/set) or the event stream (GET /v1/instances/{id}/events)"
            }
            Integration::Sqs => "paceline has no SQS events: use a webhook (webhook/set)",
            _ => "paceline has no chatbot integrations: use a webhook (webhook/set), or the AI attendant (/v1/instances/{id}/attendant)",
        }
    }
}

/// An integration's settings on an instance: none (`null`; `[]` for a bot integration's
/// list of bots), since paceline has none of them. 404 `not_found` for a name Evolution
/// does not have.
#[utoipa::path(get, path = "/{integration}/find/{instanceName}", tag = "evolution", operation_id = "evolution_integration_find",
    params(
        ("integration" = Integration, Path, description = "websocket, sqs, or a bot integration (typebot, openai, dify, flowise, evolutionBot, n8n, evoai)"),
        ("instanceName" = String, Path, description = "instance name"),
    ),
    responses(
        (status = 200, description = "none set: `null`, or `[]` for a bot integration", body = Value),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such integration", body = ErrorBody),
    ),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn integration_find(
    Path((integration, _name)): Path<(String, String)>,
    _access: ActionAccess,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(if named(&integration)?.is_bot() { Value::Array(vec![]) } else { Value::Null }))
}

/// Set an integration: refused (400 `validation_failed`, saying what to use instead),
/// since paceline has none of them.
#[utoipa::path(post, path = "/{integration}/set/{instanceName}", tag = "evolution", operation_id = "evolution_integration_set",
    params(
        ("integration" = Integration, Path, description = "websocket or sqs"),
        ("instanceName" = String, Path, description = "instance name"),
    ),
    responses(
        (status = 400, description = "`validation_failed`: paceline does not have it (the message says what to use)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such integration", body = ErrorBody),
    ),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn integration_set(
    Path((integration, _name)): Path<(String, String)>,
    _access: ActionAccess,
) -> Result<Json<Value>, ApiError> {
    Err(ApiError::validation(named(&integration)?.refusal()))
}

/// A bot integration's default settings on an instance: none (`null`).
#[utoipa::path(get, path = "/{integration}/fetchSettings/{instanceName}", tag = "evolution", operation_id = "evolution_integration_fetchSettings",
    params(
        ("integration" = Integration, Path, description = "a bot integration: typebot, openai, dify, flowise, evolutionBot, n8n, evoai"),
        ("instanceName" = String, Path, description = "instance name"),
    ),
    responses(
        (status = 200, description = "none set: `null`", body = Value),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such bot integration", body = ErrorBody),
    ),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn bot_settings(
    Path((integration, _name)): Path<(String, String)>,
    _access: ActionAccess,
) -> Result<Json<Value>, ApiError> {
    match named(&integration)?.is_bot() {
        true => Ok(Json(Value::Null)),
        false => Err(ApiError::not_found("bot integration")),
    }
}

/// The integration of a path's first segment (404 for a name Evolution does not have).
fn named(raw: &str) -> Result<Integration, ApiError> {
    serde_json::from_value(Value::String(raw.to_string())).map_err(|_| ApiError::not_found("integration"))
}
