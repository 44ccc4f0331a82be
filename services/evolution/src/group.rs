//! Evolution v2's group routes (docs/evolution.md): each calls the core's group operation
//! (`domain::groups`, as `/v1` does: the same caps, the same network operations), and answers
//! in Evolution's shapes (`src/api/controllers/group.controller.ts`, Baileys' group metadata).
//! The group goes in the `groupJid` query parameter.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use shared::contract::ParticipantAction;
use shared::jid::Jid;
use shared::ApiError;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::EvolutionErrors;
use super::{ActionAccess, ActionJson};
use domain::groups::{self as core, GroupChange, GroupOut};
use door::extract::ValidatedQuery;
use door::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(fetch_all_groups))
        .routes(routes!(find_group_infos))
        .routes(routes!(participants))
        .routes(routes!(update_participant))
        .routes(routes!(invite_code))
        .routes(routes!(revoke_invite_code))
        .routes(routes!(accept_invite_code))
        .routes(routes!(update_setting))
        .routes(routes!(update_subject))
        .routes(routes!(update_description))
        .routes(routes!(leave_group))
        .routes(routes!(update_group_picture))
        .routes(routes!(invite_info))
        .routes(routes!(send_invite))
        .routes(routes!(toggle_ephemeral))
}

/// A group as Baileys' metadata shows it.
fn metadata(g: GroupOut) -> Value {
    let participants: Vec<Value> = g
        .participants
        .iter()
        .map(|p| {
            let admin = match p.role.as_str() {
                "admin" | "superadmin" => Value::String(p.role.clone()),
                _ => Value::Null,
            };
            json!({ "id": p.jid, "admin": admin })
        })
        .collect();
    json!({
        "id": g.jid,
        "subject": g.subject,
        "desc": g.description,
        "owner": g.owner,
        "creation": g.created_at.map(|t| t.timestamp()),
        "announce": g.announce,
        "restrict": g.locked,
        "ephemeralDuration": g.ephemeral,
        "size": participants.len(),
        "pictureUrl": Value::Null,
        "participants": participants,
    })
}

/// The `groupJid` query parameter.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct EvoGroupQuery {
    /// The group's JID (`...@g.us`).
    #[param(value_type = domain::schemas::GroupJid)]
    pub group_jid: String,
}

impl EvoGroupQuery {
    /// The group's JID.
    fn jid(&self) -> Result<Jid, ApiError> {
        Jid::parse(&self.group_jid).map_err(|_| ApiError::validation("groupJid must be a group's JID"))
    }
}

/// Body of `POST /group/create/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoGroupCreateIn {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub subject: String,
    /// Up to 2,048 characters.
    #[schema(max_length = 2048)]
    pub description: Option<String>,
    /// Phone numbers with country code, or JIDs of persons: up to 1,024.
    #[serde(default)]
    #[schema(max_items = 1024, value_type = Vec<super::EvoPerson>)]
    pub participants: Vec<String>,
}

/// Create a group (the account owns it); with a description, it is set after.
#[utoipa::path(post, path = "/group/create/{instanceName}", tag = "evolution", operation_id = "evolution_group_create",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoGroupCreateIn,
    responses((status = 200, description = "the group's metadata", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn create(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoGroupCreateIn>,
) -> Result<Json<Value>, ApiError> {
    let g = core::create(a.ctx(&state), &b.subject, &b.participants, b.description).await?;
    Ok(Json(metadata(g)))
}

/// Query of `fetchAllGroups`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct EvoAllQuery {
    /// With `true`, each group's members too (they always come).
    pub get_participants: Option<String>,
}

/// Every group the account is in.
#[utoipa::path(get, path = "/group/fetchAllGroups/{instanceName}", tag = "evolution", operation_id = "evolution_group_fetchAllGroups",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoAllQuery),
    responses((status = 200, description = "the groups' metadata", body = Vec<Object>), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn fetch_all_groups(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(_q): ValidatedQuery<EvoAllQuery>,
) -> Result<Json<Vec<Value>>, ApiError> {
    let all = core::list(a.ctx(&state)).await?;
    Ok(Json(all.into_iter().map(metadata).collect()))
}

/// One group's metadata.
#[utoipa::path(get, path = "/group/findGroupInfos/{instanceName}", tag = "evolution", operation_id = "evolution_group_findGroupInfos",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    responses((status = 200, description = "the group's metadata", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn find_group_infos(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
) -> Result<Json<Value>, ApiError> {
    let g = core::get(a.ctx(&state), q.jid()?).await?;
    Ok(Json(metadata(g)))
}

/// A group's members.
#[utoipa::path(get, path = "/group/participants/{instanceName}", tag = "evolution", operation_id = "evolution_group_participants",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    responses((status = 200, description = "`{participants: [{id, admin}]}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn participants(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
) -> Result<Json<Value>, ApiError> {
    let g = core::get(a.ctx(&state), q.jid()?).await?;
    Ok(Json(json!({ "participants": metadata(g)["participants"] })))
}

/// Body of `POST /group/updateParticipant/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoUpdateParticipantIn {
    /// `add`, `remove`, `promote` or `demote`.
    #[schema(value_type = EvoParticipantAction)]
    pub action: ParticipantAction,
    /// 1 to 1,024 phone numbers with country code, or JIDs of persons.
    #[schema(min_items = 1, max_items = 1024, value_type = Vec<super::EvoPerson>)]
    pub participants: Vec<String>,
}

super::described!(
    /// What `updateParticipant` does.
    EvoParticipantAction,
    json!({ "type": "string", "enum": ["add", "remove", "promote", "demote"] })
);

/// Add, remove, promote or demote members (the same per-minute cap as `/v1`), with a
/// status per member (`200`, or the network's refusal).
#[utoipa::path(post, path = "/group/updateParticipant/{instanceName}", tag = "evolution", operation_id = "evolution_group_updateParticipant",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    request_body = EvoUpdateParticipantIn,
    responses((status = 200, description = "`{updateParticipants: [{status, jid}]}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_participant(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
    ActionJson(b): ActionJson<EvoUpdateParticipantIn>,
) -> Result<Json<Value>, ApiError> {
    let out = core::participants(a.ctx(&state), q.jid()?, b.action, &b.participants).await?;
    let results: Vec<Value> = out
        .into_iter()
        .map(|r| {
            let status = if r.ok == Some(true) { "200".to_string() } else { "403".to_string() };
            json!({ "status": status, "jid": r.jid, "error": r.error })
        })
        .collect();
    Ok(Json(json!({ "updateParticipants": results })))
}

/// The group's invite code and link (admins only).
#[utoipa::path(get, path = "/group/inviteCode/{instanceName}", tag = "evolution", operation_id = "evolution_group_inviteCode",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    responses((status = 200, description = "`{inviteUrl, inviteCode}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn invite_code(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
) -> Result<Json<Value>, ApiError> {
    invite(state, &a, &q, false).await.map(|(url, code)| Json(json!({ "inviteUrl": url, "inviteCode": code })))
}

async fn invite(
    state: AppState,
    a: &ActionAccess,
    q: &EvoGroupQuery,
    reset: bool,
) -> Result<(String, String), ApiError> {
    let link = core::invite_link(a.ctx(&state), q.jid()?, reset).await?;
    let code = core::invite_code(&link).unwrap_or_default().to_string();
    Ok((link, code))
}

/// Revoke the invite link and make a new one (admins only).
#[utoipa::path(post, path = "/group/revokeInviteCode/{instanceName}", tag = "evolution", operation_id = "evolution_group_revokeInviteCode",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    responses((status = 200, description = "`{revoked, inviteCode}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn revoke_invite_code(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
) -> Result<Json<Value>, ApiError> {
    invite(state, &a, &q, true).await.map(|(_, code)| Json(json!({ "revoked": true, "inviteCode": code })))
}

/// Query of `acceptInviteCode`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct EvoInviteCodeQuery {
    /// The invite code, or the link `https://chat.whatsapp.com/<code>`.
    #[param(min_length = 6, max_length = 256, pattern = r"^(https://chat\.whatsapp\.com/)?[A-Za-z0-9]{6,64}$")]
    pub invite_code: String,
}

impl EvoInviteCodeQuery {
    /// The code, from the code or the link (as the core reads it).
    fn code(&self) -> Result<&str, ApiError> {
        core::invite_code(&self.invite_code)
            .ok_or_else(|| ApiError::validation("inviteCode must be an invite code or link"))
    }
}

/// Join a group by its invite code (the same daily cap as `/v1`).
#[utoipa::path(get, path = "/group/acceptInviteCode/{instanceName}", tag = "evolution", operation_id = "evolution_group_acceptInviteCode",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoInviteCodeQuery),
    responses((status = 200, description = "`{accepted, groupJid}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn accept_invite_code(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoInviteCodeQuery>,
) -> Result<Json<Value>, ApiError> {
    let g = core::join(a.ctx(&state), q.code()?).await?;
    Ok(Json(json!({ "accepted": true, "groupJid": g.jid })))
}

/// Body of `POST /group/updateSetting/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoSettingIn {
    /// `announcement`, `not_announcement`, `locked` or `unlocked`.
    #[schema(value_type = EvoGroupSetting)]
    pub action: String,
}

super::described!(
    /// What `updateSetting` changes.
    EvoGroupSetting,
    json!({ "type": "string", "enum": ["announcement", "not_announcement", "locked", "unlocked"] })
);

/// Announcement mode (only admins send) or lock (only admins edit the info).
#[utoipa::path(post, path = "/group/updateSetting/{instanceName}", tag = "evolution", operation_id = "evolution_group_updateSetting",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    request_body = EvoSettingIn,
    responses((status = 200, description = "`{updateSetting: true}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_setting(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
    ActionJson(b): ActionJson<EvoSettingIn>,
) -> Result<Json<Value>, ApiError> {
    let mut patch = GroupChange::default();
    match b.action.as_str() {
        "announcement" => patch.announce = Some(true),
        "not_announcement" => patch.announce = Some(false),
        "locked" => patch.locked = Some(true),
        "unlocked" => patch.locked = Some(false),
        _ => return Err(ApiError::validation("action must be announcement, not_announcement, locked or unlocked")),
    }
    core::apply(a.ctx(&state), q.jid()?, patch).await?;
    Ok(Json(json!({ "updateSetting": true })))
}

/// Body of `POST /group/updateGroupSubject/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoSubjectIn {
    /// 1-100 characters.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub subject: String,
}

/// Rename the group.
#[utoipa::path(post, path = "/group/updateGroupSubject/{instanceName}", tag = "evolution", operation_id = "evolution_group_updateGroupSubject",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    request_body = EvoSubjectIn,
    responses((status = 200, description = "`{update: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_subject(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
    ActionJson(b): ActionJson<EvoSubjectIn>,
) -> Result<Json<Value>, ApiError> {
    let patch = GroupChange { subject: Some(b.subject), ..GroupChange::default() };
    core::apply(a.ctx(&state), q.jid()?, patch).await?;
    Ok(Json(json!({ "update": "success" })))
}

/// Body of `POST /group/updateGroupDescription/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoDescriptionIn {
    /// Up to 2,048 characters; empty removes it.
    #[schema(max_length = 2048)]
    pub description: String,
}

/// Change the group's description.
#[utoipa::path(post, path = "/group/updateGroupDescription/{instanceName}", tag = "evolution", operation_id = "evolution_group_updateGroupDescription",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    request_body = EvoDescriptionIn,
    responses((status = 200, description = "`{update: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_description(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
    ActionJson(b): ActionJson<EvoDescriptionIn>,
) -> Result<Json<Value>, ApiError> {
    let patch = GroupChange { description: Some(b.description), ..GroupChange::default() };
    core::apply(a.ctx(&state), q.jid()?, patch).await?;
    Ok(Json(json!({ "update": "success" })))
}

/// Leave the group.
#[utoipa::path(delete, path = "/group/leaveGroup/{instanceName}", tag = "evolution", operation_id = "evolution_group_leaveGroup",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    responses((status = 200, description = "`{groupJid, leave: true}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn leave_group(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
) -> Result<Json<Value>, ApiError> {
    core::leave(a.ctx(&state), q.jid()?).await?;
    Ok(Json(json!({ "groupJid": q.group_jid, "leave": true })))
}

/// Body of `POST /group/updateGroupPicture/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoGroupPictureIn {
    /// An http(s) URL of a JPEG image, or its bytes in base64 (up to 5 MiB).
    #[schema(value_type = EvoGroupPicture)]
    pub image: String,
}

super::described!(
    /// A group's picture: an http(s) URL of a JPEG (never a private, loopback or link-local
    /// address), or a JPEG's bytes in base64 (up to 5 MiB; bare or as a `data:` URL).
    EvoGroupPicture,
    json!({
        "description": "An http(s) URL of a JPEG image, or its bytes in base64 (up to 5 MiB; a JPEG starts with FF D8 FF, `/9j/` in base64)",
        "oneOf": [
            { "type": "string", "pattern": super::HTTP_URL_PATTERN },
            { "type": "string", "maxLength": 6_990_531,
              "pattern": "^(data:image/jpeg;base64,)?/9j/([A-Za-z0-9+/]{4})*([A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)?$" },
        ]
    })
);

/// A group's picture (admins only), from a JPEG's URL or bytes, checked and passed to
/// the session as the account's picture is (`PUT /v1/instances/{id}/profile/picture`).
#[utoipa::path(post, path = "/group/updateGroupPicture/{instanceName}", tag = "evolution", operation_id = "evolution_group_updateGroupPicture",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    request_body = EvoGroupPictureIn,
    responses((status = 200, description = "`{update: \"success\"}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn update_group_picture(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
    ActionJson(b): ActionJson<EvoGroupPictureIn>,
) -> Result<Json<Value>, ApiError> {
    let jid = core::group(q.jid()?)?;
    let media = if b.image.starts_with("http://") || b.image.starts_with("https://") {
        domain::message_in::MediaIn { url: Some(b.image), data: None, mime_type: None, filename: None }
    } else {
        let data = b.image.split_once(";base64,").map_or(b.image.as_str(), |(_, d)| d).to_string();
        domain::message_in::MediaIn {
            url: None,
            data: Some(data),
            mime_type: Some("image/jpeg".into()),
            filename: None,
        }
    };
    domain::pictures::set(&state, &a.row.id, media, false, Some(jid)).await?;
    Ok(Json(json!({ "update": "success" })))
}

/// A group's metadata by invite code, without joining.
#[utoipa::path(get, path = "/group/inviteInfo/{instanceName}", tag = "evolution", operation_id = "evolution_group_inviteInfo",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoInviteCodeQuery),
    responses((status = 200, description = "the group's metadata", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn invite_info(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoInviteCodeQuery>,
) -> Result<Json<Value>, ApiError> {
    let g = core::invite_info(a.ctx(&state), q.code()?).await?;
    Ok(Json(metadata(g)))
}

/// Body of `POST /group/sendInvite/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoSendInviteIn {
    /// The group's JID (`...@g.us`).
    #[schema(value_type = domain::schemas::GroupJid)]
    pub group_jid: String,
    /// Text before the link, up to 16,000 characters.
    #[schema(max_length = 16_000)]
    pub description: Option<String>,
    /// Phone numbers with country code (or JIDs): 1 to 20.
    #[schema(min_items = 1, max_items = 20, value_type = Vec<super::EvoRecipient>)]
    pub numbers: Vec<String>,
}

/// Send the group's invite link to numbers: one text each (`description` and the link),
/// queued and paced like any send (admins only, as the link is).
#[utoipa::path(post, path = "/group/sendInvite/{instanceName}", tag = "evolution", operation_id = "evolution_group_sendInvite",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoSendInviteIn,
    responses((status = 200, description = "`{send: true, inviteUrl}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn send_invite(
    State(state): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<EvoSendInviteIn>,
) -> Result<Json<Value>, ApiError> {
    if b.numbers.is_empty() || b.numbers.len() > 20 {
        return Err(ApiError::validation("numbers must name 1 to 20 recipients"));
    }
    if b.description.as_ref().is_some_and(|d| d.chars().count() > 16_000) {
        return Err(ApiError::validation("description must be at most 16000 characters"));
    }
    let q = EvoGroupQuery { group_jid: b.group_jid };
    let (url, _) = invite(state.clone(), &a, &q, false).await?;
    let text = match b.description.filter(|d| !d.trim().is_empty()) {
        Some(d) => format!("{d}\n\n{url}"),
        None => url.clone(),
    };
    // Every number is checked before anything is queued.
    for n in &b.numbers {
        domain::message_in::normalize_jid(n)?;
    }
    for n in b.numbers {
        let mut m = domain::message_in::MessageIn::new(n, shared::message::MessageType::Text);
        m.text = Some(text.clone());
        domain::send::queue(a.ctx(&state), m, None, false).await?;
    }
    Ok(Json(json!({ "send": true, "inviteUrl": url })))
}

/// Body of `POST /group/toggleEphemeral/{instanceName}`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct EvoEphemeralIn {
    /// Seconds a message lives: 0 (off), 86400, 604800 or 7776000.
    #[schema(value_type = EvoExpiration)]
    pub expiration: u32,
}

super::described!(
    /// How long a group's messages live, in seconds: 0 (off), a day, a week or 90 days.
    EvoExpiration,
    json!({ "type": "integer", "enum": core::EPHEMERAL_CHOICES })
);

/// Disappearing messages in a group (admins only).
#[utoipa::path(post, path = "/group/toggleEphemeral/{instanceName}", tag = "evolution", operation_id = "evolution_group_toggleEphemeral",
    params(("instanceName" = String, Path, description = "the instance's name"), EvoGroupQuery),
    request_body = EvoEphemeralIn,
    responses((status = 200, description = "`{success: true}`", body = Object), EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
async fn toggle_ephemeral(
    State(state): State<AppState>,
    a: ActionAccess,
    ValidatedQuery(q): ValidatedQuery<EvoGroupQuery>,
    ActionJson(b): ActionJson<EvoEphemeralIn>,
) -> Result<Json<Value>, ApiError> {
    if !core::EPHEMERAL_CHOICES.contains(&b.expiration) {
        return Err(ApiError::validation("expiration must be 0, 86400, 604800 or 7776000 seconds"));
    }
    let change = GroupChange { ephemeral: Some(b.expiration), ..GroupChange::default() };
    core::apply(a.ctx(&state), q.jid()?, change).await?;
    Ok(Json(json!({ "success": true })))
}
