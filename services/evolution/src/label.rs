//! Evolution v2's label routes (business accounts; docs/evolution.md):
//! the core's label list and chat labelling (`domain::labels`), in Evolution's shapes
//! (`src/api/controllers/label.controller.ts`). A personal account gets 400
//! `business_account_required`.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use shared::jid::Jid;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::EvolutionErrors;
use super::{ActionAccess, ActionJson};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(find_labels)).routes(routes!(handle_label))
}

/// A label as Evolution lists it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoLabelOut {
    pub id: String,
    pub name: String,
    /// An index into WhatsApp's palette (0-19).
    pub color: i32,
    /// WhatsApp's predefined label this one is (none when the account made it).
    pub predefined_id: Option<String>,
}

/// The account's labels.
#[utoipa::path(get, path = "/label/findLabels/{instanceName}", tag = "evolution", operation_id = "evolution_label_findLabels",
    params(("instanceName" = String, Path, description = "the instance's name")),
    responses((status = 200, description = "the labels", body = Vec<EvoLabelOut>), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find_labels(State(state): State<AppState>, a: ActionAccess) -> Result<Json<Vec<EvoLabelOut>>, ApiError> {
    let labels = domain::labels::list(a.ctx(&state)).await?;
    Ok(Json(
        labels
            .into_iter()
            .map(|l| EvoLabelOut { id: l.id, name: l.name, color: l.color, predefined_id: None })
            .collect(),
    ))
}

/// Body of `POST /label/handleLabel/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoHandleLabelIn {
    /// The chat: a phone number with country code, or a JID.
    #[schema(value_type = Jid)]
    pub number: String,
    /// The label's id (1-64 letters, digits, `-` or `_`).
    #[schema(value_type = domain::schemas::LabelId)]
    pub label_id: String,
    /// `add` or `remove`.
    #[schema(schema_with = action_schema)]
    pub action: String,
}

fn action_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    super::json_schema(json!({ "type": "string", "enum": ["add", "remove"], "description": "`add` or `remove`." }))
}

/// Put a label on a chat or take it off (on the network first, as `/v1`).
#[utoipa::path(post, path = "/label/handleLabel/{instanceName}", tag = "evolution", operation_id = "evolution_label_handleLabel",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoHandleLabelIn,
    responses((status = 200, description = "`{numberJid, labelId, add|remove: true}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn handle_label(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoHandleLabelIn>,
) -> Result<Json<Value>, ApiError> {
    let labeled = match b.action.as_str() {
        "add" => true,
        "remove" => false,
        _ => return Err(ApiError::validation("action must be add or remove")),
    };
    let jid = Jid::parse(&b.number).map_err(|_| ApiError::validation("number must be a phone number or a JID"))?;
    // (`labelId`'s form is checked by `set_chat`, before anything is read.)
    let number_jid = String::from(jid.clone());
    domain::labels::set_chat(a.ctx(&state), b.label_id.clone(), jid, labeled).await?;
    let mut out = json!({ "numberJid": number_jid, "labelId": b.label_id });
    out[b.action.as_str()] = Value::Bool(true);
    Ok(Json(out))
}
