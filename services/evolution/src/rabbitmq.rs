//! Evolution's `rabbitmq/set` and `rabbitmq/find` (docs/rabbitmq.md), over the same sink
//! as `/v1/instances/{id}/rabbitmq`, in Evolution's shape: the deployment's broker
//! (`rabbitmq.url`, Evolution's `RABBITMQ_URI`), an exchange named after the instance, a
//! durable queue `<instance>.<event>` per event, Evolution's payloads.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::db::webhooks::WebhookFormat;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::EvolutionErrors;
use super::{ActionAccess, ActionJson};
use domain::sinks::{self, RabbitmqIn, Shape};
use door::AppState;
use shared::db::sinks::Owner;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set)).routes(routes!(find))
}

/// Evolution's events settings (`{enabled, events}`).
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct EvoEventsIn {
    pub enabled: Option<bool>,
    /// Evolution's event names (`MESSAGES_UPSERT`, ...); empty: every one paceline has.
    pub events: Option<Vec<String>>,
}

/// Body of `POST /rabbitmq/set/{instanceName}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct EvoRabbitmqIn {
    pub rabbitmq: EvoEventsIn,
}

/// The sink as Evolution shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EvoRabbitmqOut {
    pub enabled: bool,
    /// Evolution's event names it publishes (empty: every one paceline has).
    pub events: Vec<String>,
}

/// Publish the instance's events to the deployment's RabbitMQ as Evolution does (400
/// `validation_failed` when the deployment has no broker, or for an unknown event).
#[utoipa::path(post, path = "/rabbitmq/set/{instanceName}", tag = "evolution", operation_id = "evolution_rabbitmq_set",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoRabbitmqIn,
    responses((status = 200, description = "`{rabbitmq: {enabled, events}}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn set(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoRabbitmqIn>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let names = b.rabbitmq.events.unwrap_or_default();
    if let Some(bad) = names.iter().find(|n| !evolution_shape::known_event(n)) {
        let bad: String = bad.chars().take(40).collect();
        return Err(ApiError::validation(format!("unknown Evolution event {bad:?}")));
    }
    let enabled = b.rabbitmq.enabled.unwrap_or(false);
    let body = RabbitmqIn {
        enabled,
        url: None,
        exchange: Some(a.row.name.clone()),
        queue: Some(String::new()),
        events: evolution_shape::our_events(&names),
        allow_private_targets: false,
    };
    let shape = Shape { format: WebhookFormat::Evolution, evolution_events: names.clone() };
    let sink = sinks::put(&state, &Owner::Instance(a.row.id.clone()), false, body, shape).await?;
    Ok(Json(serde_json::json!({ "rabbitmq": EvoRabbitmqOut { enabled: sink.enabled, events: names } })))
}

/// The instance's sink as Evolution shows it; `null` when none is set.
#[utoipa::path(get, path = "/rabbitmq/find/{instanceName}", tag = "evolution", operation_id = "evolution_rabbitmq_find",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "the sink, or `null`", body = Option<EvoRabbitmqOut>), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find(State(state): State<AppState>, a: ActionAccess) -> Result<Json<Option<EvoRabbitmqOut>>, ApiError> {
    let row = sinks::stored(&state, &Owner::Instance(a.row.id.clone())).await?;
    Ok(Json(row.map(|r| EvoRabbitmqOut {
        enabled: r.enabled,
        events: if r.format == WebhookFormat::Evolution { r.evolution_events } else { r.events },
    })))
}
