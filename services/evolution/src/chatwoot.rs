//! Evolution's `chatwoot/set` and `chatwoot/find` (docs/evolution.md), over the same
//! inbox as `/v1/instances/{id}/chatwoot`: Evolution's camelCase settings mapped to ours.
//! The access token is write-only here too: `find` shows it as `""`, and a `set` without
//! one keeps the stored token while Chatwoot's address and account stay the same.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::EvolutionErrors;
use super::{ActionAccess, ActionJson};
use domain::chatwoot::{self, ChatwootIn, ChatwootOut};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set)).routes(routes!(find))
}

/// Body of `POST /chatwoot/set/{instanceName}`: Evolution's Chatwoot settings.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoChatwootIn {
    pub enabled: Option<bool>,
    /// The Chatwoot account (a string in Evolution; a number is taken too).
    #[schema(schema_with = account_id_schema)]
    pub account_id: Option<Value>,
    /// Write-only; absent or empty keeps the stored one (same address and account).
    pub token: Option<String>,
    /// Chatwoot's address.
    pub url: Option<String>,
    pub sign_msg: Option<bool>,
    /// Between the agent's name and the message; `\n` written out (a backslash and an
    /// `n`, as Evolution Manager sends it) is a line break, as in Evolution.
    pub sign_delimiter: Option<String>,
    /// The name of the inbox the bridge creates (default: the instance's name);
    /// `autoCreate` is always on.
    pub name_inbox: Option<String>,
    pub reopen_conversation: Option<bool>,
    pub conversation_pending: Option<bool>,
    pub auto_create: Option<bool>,
    /// The local log's chats become contacts, once.
    pub import_contacts: Option<bool>,
    /// The local log's recent messages go into their conversations, once.
    pub import_messages: Option<bool>,
    /// Days of messages to import (1 to 90; default 7).
    pub days_limit_import_messages: Option<f64>,
    pub merge_brazil_contacts: Option<bool>,
    pub ignore_jids: Option<Vec<String>>,
    /// Taken and not used (Evolution names the bot contact with them).
    pub organization: Option<String>,
    pub logo: Option<String>,
}

fn account_id_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(serde_json::json!({
        "type": ["string", "integer", "null"],
        "description": "The Chatwoot account (a string in Evolution; a number is taken too).",
    }))
}

/// The instance's Chatwoot settings as Evolution shows them.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoChatwootOut {
    pub enabled: bool,
    pub account_id: String,
    /// Always `""`: the token is write-only.
    pub token: String,
    pub url: String,
    pub name_inbox: String,
    pub sign_msg: bool,
    pub sign_delimiter: Option<String>,
    pub reopen_conversation: bool,
    pub conversation_pending: bool,
    pub auto_create: bool,
    pub import_contacts: bool,
    pub import_messages: bool,
    pub days_limit_import_messages: u32,
    pub merge_brazil_contacts: bool,
    pub ignore_jids: Vec<String>,
    /// Where Chatwoot must post the inbox's webhooks (a secret); `""` when none is set.
    #[serde(rename = "webhook_url")]
    pub webhook_url: String,
}

impl EvoChatwootOut {
    fn of(c: ChatwootOut, name: &str) -> EvoChatwootOut {
        let mut ignore_jids = c.ignore_jids;
        if !c.groups {
            ignore_jids.insert(0, format!("@{}", shared::jid::GROUP_SERVER));
        }
        EvoChatwootOut {
            enabled: c.enabled,
            account_id: c.account_id.to_string(),
            token: String::new(),
            url: c.url,
            name_inbox: c.inbox_name.unwrap_or_else(|| name.to_string()),
            sign_msg: c.sign_messages,
            sign_delimiter: c.sign_messages.then(|| escape_breaks(&c.sign_delimiter)),
            reopen_conversation: c.reopen_conversation,
            conversation_pending: c.conversation_pending,
            auto_create: true,
            import_contacts: c.import_contacts,
            import_messages: c.import_messages,
            days_limit_import_messages: c.import_days,
            merge_brazil_contacts: false,
            ignore_jids,
            webhook_url: c.webhook_url,
        }
    }

    /// What `find` shows for an instance without an inbox (as Evolution does).
    fn none() -> EvoChatwootOut {
        EvoChatwootOut {
            enabled: false,
            account_id: String::new(),
            token: String::new(),
            url: String::new(),
            name_inbox: String::new(),
            sign_msg: false,
            sign_delimiter: None,
            reopen_conversation: false,
            conversation_pending: false,
            auto_create: false,
            import_contacts: false,
            import_messages: false,
            days_limit_import_messages: 0,
            merge_brazil_contacts: false,
            ignore_jids: vec![],
            webhook_url: String::new(),
        }
    }
}

fn account(v: &Option<Value>) -> Result<Option<i64>, ApiError> {
    let bad = || ApiError::validation("accountId must be a Chatwoot account id (a positive number)");
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| bad()),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

/// Set the instance's Chatwoot inbox (Evolution's settings; docs/evolution.md says what
/// differs). `enabled: false` with no inbox stored answers the empty settings and
/// stores nothing.
#[utoipa::path(post, path = "/chatwoot/set/{instanceName}", tag = "evolution", operation_id = "evolution_chatwoot_set",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoChatwootIn,
    responses((status = 200, description = "the settings", body = EvoChatwootOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn set(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoChatwootIn>,
) -> Result<Json<EvoChatwootOut>, ApiError> {
    let id = &a.row.id;
    let now = match chatwoot::get(&state, id).await {
        Ok(c) => Some(c),
        Err(domain::Error::NotFound(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let enabled = b.enabled.unwrap_or(true);
    let url = b.url.clone().filter(|u| !u.trim().is_empty());
    let account_id = account(&b.account_id)?;
    if !enabled && (url.is_none() || account_id.is_none()) {
        return match now {
            Some(_) => {
                let out =
                    chatwoot::patch(&state, id, a.principal.is_admin(), &serde_json::json!({"enabled": false})).await?;
                Ok(Json(EvoChatwootOut::of(out, &a.row.name)))
            }
            None => Ok(Json(EvoChatwootOut::none())),
        };
    }
    let (Some(url), Some(account_id)) = (url, account_id) else {
        return Err(ApiError::validation("url and accountId are required"));
    };
    let sign = b.sign_msg.unwrap_or(true);
    let mut ignore_jids = b.ignore_jids.unwrap_or_default();
    // Evolution lists the groups' server alone to mean every group (and the people's every person,
    // which paceline does not take: the inbox would carry nothing).
    let every = |server: &str| format!("@{server}");
    let groups = !ignore_jids.contains(&every(shared::jid::GROUP_SERVER));
    ignore_jids.retain(|j| *j != every(shared::jid::GROUP_SERVER) && *j != every(shared::jid::USER_SERVER));
    let body = ChatwootIn {
        enabled,
        url,
        account_id,
        token: b.token.filter(|t| !t.is_empty()),
        inbox_id: None,
        inbox_name: b.name_inbox.filter(|n| !n.trim().is_empty()).or_else(|| Some(a.row.name.clone())),
        sign_messages: sign,
        sign_delimiter: b.sign_delimiter.filter(|_| sign).map_or_else(|| "\n".into(), |d| d.replace("\\n", "\n")),
        reopen_conversation: b.reopen_conversation.unwrap_or(true),
        conversation_pending: b.conversation_pending.unwrap_or(false),
        groups,
        ignore_jids,
        import_contacts: b.import_contacts.unwrap_or(false),
        import_messages: b.import_messages.unwrap_or(false),
        import_days: b.days_limit_import_messages.map(|d| d.clamp(1.0, 90.0) as u32).unwrap_or(7),
        allow_private_targets: now.as_ref().is_some_and(|n| n.allow_private_targets),
    };
    let out = chatwoot::put(&state, id, a.principal.is_admin(), body).await?;
    Ok(Json(EvoChatwootOut::of(out, &a.row.name)))
}

/// The instance's Chatwoot settings (empty ones when none is set, as Evolution answers).
#[utoipa::path(get, path = "/chatwoot/find/{instanceName}", tag = "evolution", operation_id = "evolution_chatwoot_find",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "the settings", body = EvoChatwootOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find(State(state): State<AppState>, a: ActionAccess) -> Result<Json<EvoChatwootOut>, ApiError> {
    match chatwoot::get(&state, &a.row.id).await {
        Ok(c) => Ok(Json(EvoChatwootOut::of(c, &a.row.name))),
        Err(domain::Error::NotFound(_)) => Ok(Json(EvoChatwootOut::none())),
        Err(e) => Err(e.into()),
    }
}

/// A delimiter as Evolution shows it: line breaks written out as `\n`, so a form's
/// one-line input shows and sends it back unchanged.
fn escape_breaks(d: &str) -> String {
    d.replace('\n', "\\n")
}
