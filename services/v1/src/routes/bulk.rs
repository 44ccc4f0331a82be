//! `POST /v1/instances/bulk` (admin): one action over many instances, named by id or
//! by tag. Each instance gets the same treatment as its own route (connect, restart,
//! logout, delete, a tag added or removed) and its own result; one failing does not stop the others. A tag
//! that matches more than a page is worked through page by page with `cursor`.

use axum::extract::State;
use axum::Json;
use futures::StreamExt;
use shared::db::instances::{self, ListFilter};
use shared::error::ErrorBody;

pub use domain::bulk::{BulkAction, BulkByIds, BulkByTag, BulkIn, BulkOut, BulkResult};
use shared::ids::InstanceId;
use shared::ApiError;
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

/// Batch operation over instances.
#[utoipa::path(post, path = "/v1/instances/bulk", tag = "instances",
    request_body = BulkIn,
    responses(
        (status = 200, description = "each instance's result (a failed one does not stop the others)", body = BulkOut),
        (status = 400, description = "`validation_failed`: no action, both or neither of ids and tag, over 500 ids, a malformed id, a bad cursor, `value` missing or bad for add_tag and remove_tag or given with another action", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the admin token", body = ErrorBody),
    ),
    security(("admin" = [])))]
async fn bulk(
    State(state): State<AppState>,
    _admin: Admin,
    ValidatedJson(b): ValidatedJson<BulkIn>,
) -> Result<Json<BulkOut>, ApiError> {
    let value = match &b {
        BulkIn::Ids(b) => b.value.clone(),
        BulkIn::Tag(b) => b.value.clone(),
    };
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
                &ListFilter { tag: Some(tag), after, limit: i64::from(limit) + 1, ..ListFilter::default() },
            )
            .await?;
            let (rows, next) = domain::page::page(rows, limit, |r| domain::page::encode(&["i1", r.id.as_str()]));
            (b.action, rows.into_iter().map(|r| r.id.to_string()).collect(), next)
        }
    };
    let value = match (action.takes_value(), value) {
        (true, Some(v)) if inst_service::valid_tag(&v) => v,
        (true, _) => {
            return Err(ApiError::validation("value must be the tag to add or remove (1-64 printable characters)"))
        }
        (false, Some(_)) => return Err(ApiError::validation("value goes only with add_tag and remove_tag")),
        (false, None) => String::new(),
    };
    let results: Vec<BulkResult> = futures::stream::iter(targets)
        .map(|raw| {
            let state = state.clone();
            let value = value.clone();
            async move {
                let id = InstanceId::parse(&raw).expect("checked above");
                let outcome = match action {
                    BulkAction::Connect => pairing::start(&state, &id).await.map(drop).map_err(ApiError::from),
                    BulkAction::Restart => pairing::restart_one(&state, &id).await.map_err(ApiError::from),
                    BulkAction::Logout => pairing::logout_one(&state, &id).await.map_err(ApiError::from),
                    BulkAction::Delete => inst_service::delete_one(&state, &id).await.map_err(ApiError::from),
                    BulkAction::AddTag | BulkAction::RemoveTag => {
                        let add = action == BulkAction::AddTag;
                        // Already so: nothing to write (nor to tell the worker).
                        match instances::get(&state.db, &id).await {
                            Ok(Some(r)) if r.tags.contains(&value) == add => {
                                return BulkResult { id: raw, ok: true, error: None };
                            }
                            _ => {}
                        }
                        inst_service::edit(&state, &id, |f| {
                            if !add {
                                f.tags.retain(|t| *t != value);
                            } else if !f.tags.contains(&value) {
                                f.tags.push(value);
                            }
                            Ok(())
                        })
                        .await
                        .map(drop)
                        .map_err(ApiError::from)
                    }
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
