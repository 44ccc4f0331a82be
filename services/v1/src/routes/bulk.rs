//! `POST /v1/instances/bulk` (admin): one action over many instances, named by id or
//! by tag. Each instance gets the same treatment as its own route (connect, restart,
//! logout, delete) and its own result; one failing does not stop the others. A tag
//! that matches more than a page is worked through page by page with `cursor`.

use axum::extract::State;
use axum::Json;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use shared::db::instances::{self, ListFilter};
use shared::error::{ErrorBody, ErrorDetail};
use shared::ids::InstanceId;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::instances as inst_service;
use domain::pairing;
use door::extract::{Admin, ValidatedJson};
use door::AppState;

/// Most instances one call works on (ids given, or one page of a tag).
pub const MAX_PER_CALL: usize = 500;
/// Instances worked on at once.
const CONCURRENCY: usize = 16;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(bulk))
}

/// What to do with each instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// As `POST {inst}/connect`.
    Connect,
    /// As `POST {inst}/restart`.
    Restart,
    /// As `POST {inst}/logout`.
    Logout,
    /// As `DELETE {inst}`.
    Delete,
}

/// The action and the instances: `ids`, or every instance with `tag` (then `cursor` and
/// `limit` page through them). Nothing else, and never both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum BulkIn {
    Ids(BulkByIds),
    Tag(BulkByTag),
}

/// The instances by id.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkByIds {
    pub action: BulkAction,
    /// Instance ids (1 to 500).
    #[schema(min_items = 1, max_items = 500, value_type = Vec<InstanceId>)]
    pub ids: Vec<String>,
}

/// Every instance with a tag, 500 per call in id order.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkByTag {
    pub action: BulkAction,
    #[schema(value_type = crate::schemas::Tag)]
    pub tag: String,
    /// `next_cursor` of the previous call.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
    /// Most instances this call works on (1 to 500, default 500).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// One instance's outcome.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkResult {
    pub id: String,
    pub ok: bool,
    /// Why it failed (the error the instance's own route would have given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkOut {
    pub action: BulkAction,
    /// In the order given (ids) or in id order (tag).
    pub results: Vec<BulkResult>,
    pub succeeded: usize,
    pub failed: usize,
    /// With `tag`: more instances have it; call again with this `cursor`. Absent when done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Batch operation over instances.
#[utoipa::path(post, path = "/v1/instances/bulk", tag = "instances",
    request_body = BulkIn,
    responses(
        (status = 200, description = "each instance's result (a failed one does not stop the others)", body = BulkOut),
        (status = 400, description = "`validation_failed`: no action, both or neither of ids and tag, over 500 ids, a malformed id, a bad cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn bulk(
    State(state): State<AppState>,
    _admin: Admin,
    ValidatedJson(b): ValidatedJson<BulkIn>,
) -> Result<Json<BulkOut>, ApiError> {
    let (action, targets, next_cursor): (BulkAction, Vec<String>, Option<String>) = match b {
        BulkIn::Ids(b) => {
            let ids = b.ids;
            if ids.is_empty() || ids.len() > MAX_PER_CALL {
                return Err(ApiError::validation(format!("ids must hold 1 to {MAX_PER_CALL} instance ids")));
            }
            for id in &ids {
                InstanceId::parse(id).map_err(|_| ApiError::validation("ids must be instance ids (inst_...)"))?;
            }
            // Each instance once, in the order first given.
            let mut seen = std::collections::HashSet::new();
            (b.action, ids.into_iter().filter(|id| seen.insert(id.clone())).collect(), None)
        }
        BulkIn::Tag(b) => {
            let tag = b.tag;
            if !inst_service::valid_tag(&tag) {
                return Err(ApiError::validation("tag must be 1-64 printable characters"));
            }
            let after = b.cursor.as_deref().map(inst_service::decode_cursor).transpose()?;
            let limit = domain::page::limit(b.limit, MAX_PER_CALL as u32, MAX_PER_CALL as u32)?;
            let rows = instances::list(
                &state.db,
                &ListFilter { tag: Some(tag), state: None, after, limit: i64::from(limit) + 1 },
            )
            .await?;
            let (rows, next) = domain::page::page(rows, limit, |r| domain::page::encode(&["i1", r.id.as_str()]));
            (b.action, rows.into_iter().map(|r| r.id.to_string()).collect(), next)
        }
    };
    let results: Vec<BulkResult> = futures::stream::iter(targets)
        .map(|raw| {
            let state = state.clone();
            async move {
                let id = InstanceId::parse(&raw).expect("checked above");
                let outcome = match action {
                    BulkAction::Connect => pairing::start(&state, &id).await.map(drop).map_err(ApiError::from),
                    BulkAction::Restart => pairing::restart_one(&state, &id).await.map_err(ApiError::from),
                    BulkAction::Logout => pairing::logout_one(&state, &id).await.map_err(ApiError::from),
                    BulkAction::Delete => inst_service::delete_one(&state, &id).await.map_err(ApiError::from),
                };
                match outcome {
                    Ok(()) => BulkResult { id: raw, ok: true, error: None },
                    Err(e) => BulkResult { id: raw, ok: false, error: Some(e.body().error) },
                }
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let succeeded = results.iter().filter(|r| r.ok).count();
    let failed = results.len() - succeeded;
    tracing::info!(?action, succeeded, failed, "bulk operation");
    Ok(Json(BulkOut { action, results, succeeded, failed, next_cursor }))
}
