//! `{inst}/messages`: the paced send queue. POST validates, stores media, queues the
//! message (with its network id assigned and its `message.queued` event) and wakes the
//! instance's worker; `wait=true` then waits for the result.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use domain::message_in::{self as message, MessageIn};
use futures::StreamExt;
use serde::Deserialize;
use shared::db::instances::{self};
use shared::db::messages::{self, MessageRow, MessageStatus};
use shared::error::ErrorBody;
use shared::ids::{InstanceId, MessageId};
use shared::{ApiError, ErrorCode};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::send::{queue, MessageOut, MESSAGES_BODY_LIMIT};
use door::extract::{InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use door::gate::SlotHeld;
use door::AppState;

/// `wait=true`: default and ceiling of `timeout`.
const WAIT_DEFAULT: Duration = Duration::from_secs(30);
const WAIT_CEILING: Duration = Duration::from_secs(120);

/// The send route with its 140 MB limit and the large-body semaphore, which runs before
/// the body is read.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send))
        .layer(axum::middleware::from_fn(door::gate::gate))
        .layer(axum::extract::DefaultBodyLimit::max(MESSAGES_BODY_LIMIT))
        .routes(routes!(get_message, edit_message))
        .routes(routes!(revoke_message))
}

/// Body of `PATCH {inst}/messages/{msg_id}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageEditIn {
    /// The new text: 1-4096 characters, not all white space.
    #[schema(min_length = 1, max_length = 4096, pattern = r"[^\s\u0085]")]
    pub text: String,
}

/// Replace the text of one of the account's own sent text messages (the network shows
/// it edited). The message is named by its `msg_` id in the local log: one not sent yet,
/// or not the account's, is 404.
#[utoipa::path(patch, path = "/v1/instances/{id}/messages/{msg_id}", tag = "messages",
    params(("id" = InstanceId, Path, description = "instance id"), ("msg_id" = MessageId, Path, description = "message id")),
    request_body = MessageEditIn,
    responses(
        (status = 204, description = "edited"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found` or `not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 502, description = "`worker_error`: the network refused it (not a text message)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn edit_message(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, MessageId)>,
    ValidatedJson(b): ValidatedJson<MessageEditIn>,
) -> Result<StatusCode, ApiError> {
    let ctx = access.ctx(&state);
    let (chat, wa) = domain::messages::own(ctx, &ids.1).await?;
    domain::messages::edit(ctx, chat, &wa, &b.text).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Delete one of the account's own sent messages for everyone in the chat. The message
/// is named by its `msg_` id in the local log: one not sent yet, or not the account's,
/// is 404.
#[utoipa::path(post, path = "/v1/instances/{id}/messages/{msg_id}/revoke", tag = "messages",
    params(("id" = InstanceId, Path, description = "instance id"), ("msg_id" = MessageId, Path, description = "message id")),
    responses(
        (status = 204, description = "deleted for everyone"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found` or `not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 502, description = "`worker_error`: the network refused it", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn revoke_message(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, MessageId)>,
) -> Result<StatusCode, ApiError> {
    let ctx = access.ctx(&state);
    let (chat, wa) = domain::messages::own(ctx, &ids.1).await?;
    domain::messages::revoke(ctx, chat, &wa).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Query of `POST {inst}/messages`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SendQuery {
    /// Wait for the result (sent or failed) up to `timeout`.
    pub wait: Option<bool>,
    /// How long to wait: `30s`, `90s`, `2m` (default 30s; longer waits stop at 2m).
    pub timeout: Option<String>,
}

/// Queue a message. Without `wait` the answer is 202 once it is stored. With
/// `wait=true`: 200 when sent in time, the failure's error when it fails, 202 (still
/// queued) when the timeout passes first.
#[utoipa::path(post, path = "/v1/instances/{id}/messages", tag = "messages",
    params(("id" = InstanceId, Path, description = "instance id"), SendQuery),
    request_body(content = MessageIn, description = "the message; up to 140 MB with media as base64"),
    responses(
        (status = 200, description = "sent (wait=true)", body = MessageOut),
        (status = 202, description = "queued", body = MessageOut),
        (status = 400, description = "`validation_failed` (also media.url not http(s) or internal), or with wait=true `invalid_number`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`conflict`: client_message_id reused with other content; `instance_banned`; with wait=true `instance_not_connected`", body = ErrorBody),
        (status = 410, description = "`message_expired` (wait=true)", body = ErrorBody),
        (status = 408, description = "`request_timeout`: a body over 1 MB was not received within `large_body.read_timeout_ms`", body = ErrorBody),
        (status = 413, description = "`media_too_large`: body over 140 MB or media over its type's limit; `quota_exceeded`: the instance's media storage quota is used up", body = ErrorBody),
        (status = 422, description = "`media_fetch_failed`: media.url could not be downloaded", body = ErrorBody),
        (status = 503, description = "`rate_limited`: a body over 1 MB, or a `media.url` download, waited too long for one of the cluster's large-send slots (one per instance); or `shutting_down`", body = ErrorBody),
        (status = 502, description = "`worker_error` (wait=true)", body = ErrorBody),
        (status = 504, description = "`worker_timeout` (wait=true)", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn send(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ValidatedQuery(q): ValidatedQuery<SendQuery>,
    ValidatedJson(body): ValidatedJson<MessageIn>,
) -> Result<(StatusCode, Json<MessageOut>), ApiError> {
    let wait = match (q.wait.unwrap_or(false), q.timeout.as_deref()) {
        (false, _) => None,
        (true, None) => Some(WAIT_DEFAULT),
        (true, Some(t)) => Some(
            message::parse_duration(t)
                .filter(|d| !d.is_zero())
                .ok_or_else(|| ApiError::validation("timeout must be a duration such as 30s, 90s or 2m"))?
                .min(WAIT_CEILING),
        ),
    };
    let row = queue(state.ctx(&id, principal.caller()), body, wait, held.is_some()).await?;
    match wait {
        None => Ok((StatusCode::ACCEPTED, Json((&row.0).into()))),
        Some(timeout) => wait_result(&state, &id, row, timeout).await,
    }
}

/// `wait=true`: the result if it comes in time (re-reading the row after the wait, so a
/// result published before the subscription is seen too), else 202; at once when the pod
/// starts shutting down.
async fn wait_result(
    state: &AppState,
    id: &InstanceId,
    (row, sub): (MessageRow, Option<async_nats::Subscriber>),
    timeout: Duration,
) -> Result<(StatusCode, Json<MessageOut>), ApiError> {
    if let Some(mut sub) = sub {
        if !row.status.is_final() {
            // A draining pod answers at once with what it knows (202 while queued): the
            // message is safe in Postgres, and the client follows it by id.
            tokio::select! {
                _ = tokio::time::timeout(timeout, sub.next()) => {}
                _ = state.shutdown.cancelled() => {}
            }
        }
        let _ = sub.unsubscribe().await;
    }
    let row = messages::get(&state.db, id, &row.id).await?.ok_or_else(|| ApiError::not_found("message"))?;
    match row.status {
        MessageStatus::Sent => Ok((StatusCode::OK, Json((&row).into()))),
        MessageStatus::Failed => {
            let state = instances::get(&state.db, id).await?.map(|i| i.state);
            let code = row.error_code.as_deref().unwrap_or(ErrorCode::WorkerError.as_str());
            Err(failure_error(code, row.error_detail.as_deref().unwrap_or("failed"), state))
        }
        MessageStatus::Queued | MessageStatus::InFlight => Ok((StatusCode::ACCEPTED, Json((&row).into()))),
    }
}

/// The error for a failed message's `code` and `detail`, retryable as the error table
/// says of its code (`worker_error`, `worker_timeout`: yes); `instance_not_connected`
/// depends on the instance (`state`): not while it is logged out or banned (pair it
/// again), else yes. (Retrying means sending again: the failed message stays failed.)
pub fn failure_error(code: &str, detail: &str, state: Option<instances::InstanceState>) -> ApiError {
    use instances::InstanceState;
    let code = ErrorCode::ALL.into_iter().find(|c| c.as_str() == code).unwrap_or(ErrorCode::WorkerError);
    let retryable = match code {
        ErrorCode::InstanceNotConnected => {
            !matches!(state, None | Some(InstanceState::LoggedOut | InstanceState::Banned))
        }
        _ => code.retryable(),
    };
    ApiError::new(code, format!("the message failed: {detail}")).with_retryable(retryable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::db::instances::InstanceState;

    #[test]
    fn a_failed_messages_error_is_retryable_as_its_code_says() {
        let connected = Some(InstanceState::Connected);
        for (error, state, code, retryable) in [
            ("worker_error: the network refused", connected, ErrorCode::WorkerError, true),
            ("worker_timeout: no answer", connected, ErrorCode::WorkerTimeout, true),
            ("invalid_number: no account", connected, ErrorCode::InvalidNumber, false),
            ("message_expired: too late", connected, ErrorCode::MessageExpired, false),
            (
                "instance_not_connected: reconnecting",
                Some(InstanceState::Connecting),
                ErrorCode::InstanceNotConnected,
                true,
            ),
            (
                "instance_not_connected: the number is logged out; pair it again",
                Some(InstanceState::LoggedOut),
                ErrorCode::InstanceNotConnected,
                false,
            ),
            ("instance_not_connected: banned", Some(InstanceState::Banned), ErrorCode::InstanceNotConnected, false),
            ("gibberish", connected, ErrorCode::WorkerError, true),
        ] {
            let (code_of, detail) = error.split_once(": ").unwrap_or((error, ""));
            let e = failure_error(code_of, detail, state);
            assert_eq!((e.code, e.retryable), (code, retryable), "{error}");
        }
    }
}

/// Read a message and its status.
#[utoipa::path(get, path = "/v1/instances/{id}/messages/{msg_id}", tag = "messages",
    params(("id" = InstanceId, Path, description = "instance id"), ("msg_id" = MessageId, Path, description = "message id")),
    responses(
        (status = 200, description = "the message", body = MessageOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found` or `not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_message(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, MessageId)>,
) -> Result<Json<MessageOut>, ApiError> {
    instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    let row = messages::get(&state.db, &id, &ids.1).await?.ok_or_else(|| ApiError::not_found("message"))?;
    Ok(Json((&row).into()))
}
