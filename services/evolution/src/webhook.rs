//! Evolution v2's `webhook/set` and `webhook/find` (docs/evolution.md):
//! the instance's one Evolution-format webhook, kept among its `/v1` webhooks (the same
//! URL guard, delivery log, retries and resend). Evolution's event names are stored as
//! given, and ours that they cover drive the fan-out.

use axum::extract::State;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use shared::db::webhooks::{self, WebhookRow};
use shared::ApiError;
use utoipa::openapi::{schema::Schema, RefOr};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::EvolutionErrors;
use super::{ActionAccess, ActionJson};
use domain::webhooks::{check, check_base64_room, insert, shape, WebhookFormat};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set)).routes(routes!(find))
}

/// Body of `POST /webhook/set/{instanceName}`: Evolution v2's `{webhook: {...}}`, or v1's
/// fields at the top.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoSetIn {
    pub webhook: Option<EvoWebhookIn>,
    #[serde(flatten)]
    pub top: EvoWebhookIn,
}

/// Evolution's webhook settings.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoWebhookIn {
    pub enabled: Option<bool>,
    /// http(s), up to 2,048 characters; never a private, loopback or link-local address.
    #[schema(pattern = "^[hH][tT][tT][pP][sS]?://[^/?#]+", max_length = 2048)]
    pub url: Option<String>,
    /// Append the event's name to the URL (`/messages-upsert`).
    #[serde(alias = "webhook_by_events", alias = "webhookByEvents")]
    pub by_events: Option<bool>,
    /// Received media's bytes in the payload.
    #[serde(alias = "webhook_base64", alias = "webhookBase64")]
    pub base64: Option<bool>,
    /// Evolution's event names (`MESSAGES_UPSERT`, ...); absent or empty: every one.
    #[schema(schema_with = events_schema)]
    pub events: Option<Vec<String>>,
    /// Evolution sends these headers with each delivery; paceline does not (400 when
    /// given): deliveries are signed instead.
    #[schema(schema_with = headers_schema)]
    pub headers: Option<serde_json::Value>,
}

fn events_schema() -> RefOr<Schema> {
    let names: Vec<&str> =
        evolution_shape::EVENTS.iter().map(|(e, _)| *e).chain(evolution_shape::SILENT_EVENTS.iter().copied()).collect();
    super::json_schema(json!({
        "type": ["array", "null"],
        "items": { "type": "string", "enum": names },
        "description": "Evolution's event names (`MESSAGES_UPSERT`, ...); absent or empty: every one.",
    }))
}

fn headers_schema() -> RefOr<Schema> {
    super::json_schema(json!({
        "type": ["object", "null"],
        "maxProperties": 0,
        "description": "Evolution sends these headers with each delivery; paceline does not (400 when any is given): deliveries are signed instead.",
    }))
}

/// Evolution's webhook where one is made (`instance/create`): `url` is required.
pub struct EvoNewWebhook;

impl utoipa::PartialSchema for EvoNewWebhook {
    fn schema() -> RefOr<Schema> {
        let mut schema = <EvoWebhookIn as utoipa::PartialSchema>::schema();
        if let RefOr::T(Schema::Object(o)) = &mut schema {
            o.required.push("url".into());
            o.properties.insert(
                "url".into(),
                super::json_schema(json!({
                    "type": "string", "pattern": "^[hH][tT][tT][pP][sS]?://[^/?#]+", "maxLength": 2048,
                    "description": "http(s), up to 2,048 characters; never a private, loopback or link-local address.",
                })),
            );
            o.description = Some("Evolution's webhook settings; `url` is required.".into());
        }
        schema
    }
}

impl ToSchema for EvoNewWebhook {
    fn schemas(out: &mut Vec<(String, RefOr<Schema>)>) {
        <EvoWebhookIn as ToSchema>::schemas(out);
    }
}

impl EvoWebhookIn {
    /// What the description says of the fields given, checked whether or not they are
    /// used (`webhook/set` uses the top-level ones only without `webhook`).
    fn check_form(&self) -> Result<(), ApiError> {
        match &self.headers {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Object(o)) if o.is_empty() => {}
            Some(serde_json::Value::Object(_)) => {
                return Err(ApiError::validation("headers are not sent by paceline: deliveries are signed instead"))
            }
            Some(_) => return Err(ApiError::validation("headers must be an object (and empty)")),
        }
        if let Some(bad) = self.events.iter().flatten().find(|n| !evolution_shape::known_event(n)) {
            let bad: String = bad.chars().take(40).collect();
            return Err(ApiError::validation(format!("unknown Evolution event {bad:?}")));
        }
        if let Some(u) = &self.url {
            let ok = u.len() <= 2048
                && url::Url::parse(u).is_ok_and(|p| matches!(p.scheme(), "http" | "https") && p.host_str().is_some());
            if !ok {
                return Err(ApiError::validation("url must be an http or https URL of at most 2048 characters"));
            }
        }
        Ok(())
    }
}

/// The instance's Evolution webhook as Evolution shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoWebhookOut {
    /// Our `wh_...` id (its delivery log is under `/v1/instances/{id}/webhooks/{id}`).
    pub id: String,
    pub url: String,
    pub enabled: bool,
    /// Evolution's event names it was given (empty: all).
    pub events: Vec<String>,
    pub webhook_by_events: bool,
    pub webhook_base64: bool,
    /// Our `inst_...` id.
    pub instance_id: String,
    /// `whsec_...`: the signing secret, only in the answer that created the webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl EvoWebhookOut {
    /// As `admin` or not sees it (the URL's credentials masked as on `/v1`).
    fn of(r: WebhookRow, secret: Option<String>, admin: bool) -> EvoWebhookOut {
        EvoWebhookOut {
            id: r.id.to_string(),
            url: domain::instances::masked_url(&r.url, admin),
            enabled: r.enabled,
            events: r.shape.evolution_events,
            webhook_by_events: r.shape.by_events,
            webhook_base64: r.shape.base64,
            instance_id: r.instance_id.map(|i| i.to_string()).unwrap_or_default(),
            secret,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// The instance's Evolution webhook (its oldest in that format).
async fn current(state: &AppState, row: &shared::db::instances::InstanceRow) -> Result<Option<WebhookRow>, ApiError> {
    let owner = webhooks::Owner::Instance(row.id.clone());
    Ok(webhooks::list(&state.db, &owner).await?.into_iter().find(|w| w.shape.is_evolution()))
}

/// Set the instance's Evolution-format webhook (created on first use, replaced after).
#[utoipa::path(post, path = "/webhook/set/{instanceName}", tag = "evolution", operation_id = "evolution_webhook_set",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoSetIn,
    responses((status = 200, description = "the webhook", body = EvoWebhookOut), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn set(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoSetIn>,
) -> Result<Json<EvoWebhookOut>, ApiError> {
    // The settings that go on are checked in `prepare`; the top level's, when they are
    // not the ones used, here (a bad field anywhere is a 400).
    if b.webhook.is_some() {
        b.top.check_form()?;
    }
    let existing = current(&state, &a.row).await?;
    let p = prepare(&state, b.webhook.unwrap_or(b.top), existing.as_ref()).await?;
    store(&state, &a.row, p, existing, a.principal.is_admin()).await.map(Json)
}

/// A checked Evolution webhook, ready to store.
pub(crate) struct Prepared {
    url: String,
    events: Vec<String>,
    shape: webhooks::Shape,
    enabled: bool,
}

/// Checks Evolution's webhook settings (fields left out keep `existing`'s).
pub(crate) async fn prepare(
    state: &AppState,
    w: EvoWebhookIn,
    existing: Option<&WebhookRow>,
) -> Result<Prepared, ApiError> {
    w.check_form()?;
    let mut names: Vec<String> = w.events.unwrap_or_default();
    names.sort();
    names.dedup();
    let events = evolution_shape::our_events(&names);
    let url = match (w.url, existing) {
        (Some(u), _) => u,
        (None, Some(e)) => e.url.clone(),
        (None, None) => return Err(ApiError::validation("url is required")),
    };
    let url = check(state, &url, &events).await?;
    let by_events = w.by_events.or(existing.map(|e| e.shape.by_events)).unwrap_or(false);
    let base64 = w.base64.or(existing.map(|e| e.shape.base64)).unwrap_or(false);
    let enabled = w.enabled.or(existing.map(|e| e.enabled)).unwrap_or(true);
    let shape = shape(WebhookFormat::Evolution, by_events, base64, names)?;
    Ok(Prepared { url, events, shape, enabled })
}

/// Stores the instance's Evolution webhook: replaces `existing`, or registers one.
/// `admin`: the caller is the admin (what the answer shows of the URL's credentials).
pub(crate) async fn store(
    state: &AppState,
    row: &shared::db::instances::InstanceRow,
    p: Prepared,
    existing: Option<WebhookRow>,
    admin: bool,
) -> Result<EvoWebhookOut, ApiError> {
    let Prepared { url, events, shape, enabled } = p;
    let owner = webhooks::Owner::Instance(row.id.clone());
    match existing {
        Some(e) => {
            let mut tx = state.db.begin().await?;
            check_base64_room(&mut tx, &owner, &e.id, &shape).await?;
            let edit = webhooks::Edit { url: &url, events: &events, shape: &shape, enabled, new_secret: None };
            let updated = webhooks::update(&mut *tx, &owner, &e.id, &edit)
                .await?
                .ok_or_else(|| ApiError::not_found("webhook"))?;
            if e.enabled && !enabled {
                shared::db::deliveries::fail_pending(&mut tx, &e.id, "the endpoint was disabled").await?;
            }
            tx.commit().await?;
            Ok(EvoWebhookOut::of(updated, None, admin))
        }
        None => {
            let secret = shared::auth::generate_webhook_secret();
            let mut created = insert(state, &owner, &url, &events, &shape, &secret).await?;
            if !enabled {
                let edit =
                    webhooks::Edit { url: &url, events: &events, shape: &shape, enabled: false, new_secret: None };
                created = webhooks::update(&state.db, &owner, &created.id, &edit)
                    .await?
                    .ok_or_else(|| ApiError::not_found("webhook"))?;
            }
            Ok(EvoWebhookOut::of(created, Some(secret), admin))
        }
    }
}

/// The instance's Evolution-format webhook, or null.
#[utoipa::path(get, path = "/webhook/find/{instanceName}", tag = "evolution", operation_id = "evolution_webhook_find",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "the webhook, or null", body = Option<EvoWebhookOut>), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find(State(state): State<AppState>, a: ActionAccess) -> Result<Json<Option<EvoWebhookOut>>, ApiError> {
    let admin = a.principal.is_admin();
    Ok(Json(current(&state, &a.row).await?.map(|w| EvoWebhookOut::of(w, None, admin))))
}
