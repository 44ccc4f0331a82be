//! `{inst}/channels`: WhatsApp channels (interface.md 4.5). Reading, following and
//! reacting go to the network through the instance's worker; publishing goes through the
//! send queue like any message (paced, with a message record), and only the channel's
//! owner or an admin may publish. Posts are read from the local log, as the instance
//! received them. The network's limits (interface.md part 8) are kept per instance,
//! cluster-wide in Redis (`domain::caps`); a call that fails takes nothing from them.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use shared::error::ErrorBody;
use shared::ids::InstanceId;
use shared::jid::Jid;
use shared::ApiError;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use domain::channels::{self as core, ChannelOut};
use domain::history::{self, MessagePageOut};
use domain::message_in::MessageIn;
use domain::page::PageQuery;
use domain::send::MessageOut;
use door::extract::{parse_json, InstanceAccess, Path, ValidatedJson, ValidatedQuery};
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(preview))
        .routes(routes!(get_one))
        .routes(routes!(act))
        .routes(routes!(posts, publish))
        .routes(routes!(react))
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChannelListOut {
    pub channels: Vec<ChannelOut>,
}

/// Body of `POST {inst}/channels`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelIn {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    #[schema(max_length = 2048)]
    pub description: Option<String>,
}

/// Body of `POST {inst}/channels/preview`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewIn {
    /// The channel's link (`https://whatsapp.com/channel/<code>`) or its code (1-64
    /// letters and digits), with white space around it taken away.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*(https://(www\\.)?whatsapp\\.com/channel/)?[A-Za-z0-9]{1,64}/*[\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*$"
    )]
    pub link: String,
}

/// Body of `POST {inst}/channels/{jid}/reactions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelReactionIn {
    /// The post's `server_id` (from `GET {inst}/channels/{jid}/messages`' `content`, or the network).
    #[schema(minimum = 1)]
    pub server_id: u64,
    /// One emoji (at most 16 characters, none a control character); empty removes the
    /// account's reaction.
    #[schema(max_length = 16, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    pub reaction: String,
}

/// The channels the account follows, owns or administers.
#[utoipa::path(get, path = "/v1/instances/{id}/channels", tag = "channels",
    params(("id" = InstanceId, Path, description = "instance id")),
    responses(
        (status = 200, description = "the channels", body = ChannelListOut),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn list(State(state): State<AppState>, access: InstanceAccess) -> Result<Json<ChannelListOut>, ApiError> {
    Ok(Json(ChannelListOut { channels: core::list(access.ctx(&state)).await? }))
}

/// Create a channel the account owns. At most 2 a day per instance.
#[utoipa::path(post, path = "/v1/instances/{id}/channels", tag = "channels",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = ChannelIn,
    responses(
        (status = 201, description = "the channel", body = ChannelOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: 2 creations a day (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn create(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(body): ValidatedJson<ChannelIn>,
) -> Result<(StatusCode, Json<ChannelOut>), ApiError> {
    let c = core::create(access.ctx(&state), &body.name, body.description).await?;
    Ok((StatusCode::CREATED, Json(c)))
}

/// A channel by its invite link, before following it.
#[utoipa::path(post, path = "/v1/instances/{id}/channels/preview", tag = "channels",
    params(("id" = InstanceId, Path, description = "instance id")),
    request_body = PreviewIn,
    responses(
        (status = 200, description = "the channel", body = ChannelOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no channel has this link", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn preview(
    State(state): State<AppState>,
    access: InstanceAccess,
    ValidatedJson(body): ValidatedJson<PreviewIn>,
) -> Result<Json<ChannelOut>, ApiError> {
    Ok(Json(core::preview(access.ctx(&state), &body.link).await?))
}

/// A channel's metadata and the account's role in it.
#[utoipa::path(get, path = "/v1/instances/{id}/channels/{jid}", tag = "channels",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::ChannelJid, Path, description = "the channel's JID")),
    responses(
        (status = 200, description = "the channel", body = ChannelOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such channel", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn get_one(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
) -> Result<Json<ChannelOut>, ApiError> {
    Ok(Json(core::get(access.ctx(&state), ids.1).await?))
}

/// `follow`, `unfollow`, `mute` or `unmute` a channel; answers the channel. Follows and
/// unfollows count against 3 a minute, 10 an hour and 30 a day.
#[utoipa::path(post, path = "/v1/instances/{id}/channels/{jid}/{action}", tag = "channels",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::ChannelJid, Path, description = "the channel's JID"),
        ("action" = String, Path, description = "`follow`, `unfollow`, `mute` or `unmute`", pattern = "^(follow|unfollow|mute|unmute)$")),
    responses(
        (status = 200, description = "the channel after the action", body = ChannelOut),
        (status = 400, description = "`validation_failed`: an unknown action, or one the channel refuses", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such channel", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: the follow limits (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn act(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid, String)>,
) -> Result<Json<ChannelOut>, ApiError> {
    let jid = core::channel(ids.1)?;
    let action = core::verb(&ids.2)?;
    Ok(Json(core::act(access.ctx(&state), jid, action).await?))
}

/// The channel's posts as this instance received them (and those it published),
/// newest first, from the local log.
#[utoipa::path(get, path = "/v1/instances/{id}/channels/{jid}/messages", tag = "channels",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::ChannelJid, Path, description = "the channel's JID"), PageQuery),
    responses(
        (status = 200, description = "a page of posts", body = MessagePageOut),
        (status = 400, description = "`validation_failed`: a bad limit or cursor", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`", body = ErrorBody),
        (status = 404, description = "`instance_not_found`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn posts(
    State(state): State<AppState>,
    InstanceAccess { id, .. }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedQuery(q): ValidatedQuery<PageQuery>,
) -> Result<Json<MessagePageOut>, ApiError> {
    let jid = String::from(core::channel(ids.1)?);
    shared::db::instances::get(&state.db, &id).await?.ok_or_else(ApiError::instance_not_found)?;
    Ok(Json(history::page(&state, &id, &jid, &q).await?))
}

/// Publish to a channel through the send queue: the body of `POST {inst}/messages`
/// without `to`; answers the queued message. Only the channel's owner or an admin may
/// publish (403 otherwise), at most 20 times a day per instance.
#[utoipa::path(post, path = "/v1/instances/{id}/channels/{jid}/messages", tag = "channels",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::ChannelJid, Path, description = "the channel's JID")),
    request_body = crate::schemas::ChannelPostIn,
    responses(
        (status = 202, description = "queued", body = MessageOut),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: not the channel's owner or an admin", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such channel", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`: the role is asked of the network", body = ErrorBody),
        (status = 413, description = "`media_too_large`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: 20 publications a day (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn publish(
    State(state): State<AppState>,
    InstanceAccess { id, principal }: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    body: Bytes,
) -> Result<(StatusCode, Json<MessageOut>), ApiError> {
    let jid = String::from(core::channel(ids.1)?);
    let mut fields: serde_json::Map<String, serde_json::Value> = parse_json(&body)?;
    if fields.contains_key("to") {
        return Err(ApiError::validation("to is the channel in the path; leave it out"));
    }
    fields.insert("to".into(), jid.into());
    let message: MessageIn = parse_json(&serde_json::to_vec(&fields).map_err(ApiError::internal)?)?;
    // The service checks the role and takes the publication from the day's 20.
    let queued = domain::send::queue(state.ctx(&id, principal.caller()), message, None, false).await?;
    Ok((StatusCode::ACCEPTED, Json((&queued.0).into())))
}

/// React to a channel post (an empty `reaction` removes the account's). At most 30 a
/// minute per instance.
#[utoipa::path(post, path = "/v1/instances/{id}/channels/{jid}/reactions", tag = "channels",
    params(("id" = InstanceId, Path, description = "instance id"), ("jid" = crate::schemas::ChannelJid, Path, description = "the channel's JID")),
    request_body = ChannelReactionIn,
    responses(
        (status = 204, description = "reacted"),
        (status = 400, description = "`validation_failed`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the account does not follow the channel", body = ErrorBody),
        (status = 404, description = "`instance_not_found`, or `not_found`: no such channel or post", body = ErrorBody),
        (status = 409, description = "`instance_not_connected`", body = ErrorBody),
        (status = 429, description = "`rate_limited`: 30 reactions a minute (Retry-After says when)", body = ErrorBody),
        (status = 504, description = "`worker_timeout`", body = ErrorBody),
    ),
    security(("admin" = []), ("instance" = [])))]
async fn react(
    State(state): State<AppState>,
    access: InstanceAccess,
    Path(ids): Path<(InstanceId, Jid)>,
    ValidatedJson(body): ValidatedJson<ChannelReactionIn>,
) -> Result<StatusCode, ApiError> {
    core::react(access.ctx(&state), ids.1, body.server_id, body.reaction).await?;
    Ok(StatusCode::NO_CONTENT)
}
