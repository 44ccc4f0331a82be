//! The media sends: image, video, document and audio (`sendMedia`), voice notes,
//! stickers, statuses and round videos, with the rules of their fields' forms.

use super::*;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendMediaIn {
    /// Phone with country code (or a JID).
    #[schema(value_type = crate::EvoRecipient)]
    pub number: String,
    /// Up to 1,024 characters (not sent with audio).
    #[schema(max_length = 1024)]
    pub caption: Option<String>,
    /// An http(s) address of the file, or its bytes in base64 (a `data:` URL or bare, with
    /// `mimetype`). With a multipart body, the `file` part instead.
    #[schema(required = true, schema_with = any_media_schema)]
    pub media: Option<String>,
    /// `image`, `video`, `document` or `audio`; when absent, chosen from the file's name
    /// (images and videos by theirs, when `mimetype` agrees; PDF, spreadsheets and
    /// anything else as a document).
    #[schema(schema_with = mediatype_schema)]
    pub mediatype: Option<String>,
    /// The file's MIME type (`type/subtype`, up to 127 bytes), of the family `mediatype`
    /// names; required with bare base64.
    #[schema(max_length = 127)]
    pub mimetype: Option<String>,
    /// A plain file name: 1-255 bytes, no `/` or backslash.
    #[schema(min_length = 1, max_length = 255, pattern = r"^[^/\\]+$")]
    pub file_name: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// A media field's forms: an http(s) URL (fetched: a public address), a `data:` URL with
/// base64 (of a MIME type of `family`, any when empty), or bare base64 (when `bare`).
pub(super) fn media_forms(family: &str, bare: bool, description: &str) -> Value {
    let mime = if family.is_empty() { "[^,/;]{1,63}/[^,]{0,63}".to_string() } else { format!("{family}/[^,]{{0,63}}") };
    let mut forms = vec![
        json!({ "type": "string", "pattern": crate::HTTP_URL_PATTERN }),
        json!({ "type": "string", "pattern": format!("^data:{mime};base64,{}$", crate::BASE64_BODY) }),
    ];
    if bare {
        forms.push(json!({ "type": "string", "pattern": format!("^{}$", crate::BASE64_BODY) }));
    }
    json!({ "oneOf": forms, "description": description })
}

pub(super) fn any_media_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::json_schema(media_forms(
        "",
        true,
        "An http(s) address of the file, or its bytes in base64 (a `data:` URL, or bare with `mimetype`). With a multipart body, the `file` part instead.",
    ))
}

pub(super) const MEDIA_TYPES: [&str; 4] = ["image", "video", "document", "audio"];

pub(super) fn mediatype_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::json_schema(crate::string_enum(
        &MEDIA_TYPES,
        "`image`, `video`, `document` or `audio`; when absent, chosen from the file's name (images and videos by theirs, when `mimetype` agrees; anything else as a document).",
    ))
}

pub(super) fn mediatype_form_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::json_schema(
        json!({ "type": "string", "enum": MEDIA_TYPES, "description": "`image`, `video`, `document` or `audio` (see the JSON body)." }),
    )
}

/// The rule of a media body whose bytes come as `field` (or, in a form, a `file` part,
/// which wins over `field` and comes with `mimetype`): its MIME type (`mimetype`, or else
/// a `data:` URL's) is of the family its kind needs, and bare base64 comes with
/// `mimetype`. `kinds` are the `mediatype` values (none: the body has no `mediatype`;
/// `null` among them: it may be left out) with the family each needs (empty: any). The
/// alternatives are whole, so a generator picks one and fills it in.
pub(super) fn mime_rule(field: &str, kinds: &[(&[Value], &str)], form: bool) -> Value {
    let mut alternatives = Vec::new();
    for (mediatypes, family) in kinds {
        let (mime, url) = if family.is_empty() {
            ("/".to_string(), "^(https?://|data:)".to_string())
        } else {
            (format!("^{family}/"), format!("^(https?://|data:{family}/)"))
        };
        let typed = json!({ "type": "object", "required": ["mimetype"], "properties": {
            "mimetype": { "type": "string", "pattern": mime } } });
        let untyped = json!({ "type": "object", "required": [field], "properties": {
            "mimetype": { "type": "null" }, field: { "type": "string", "pattern": url } } });
        for mut alternative in [typed, untyped] {
            if !mediatypes.is_empty() {
                alternative["properties"]["mediatype"] = json!({ "enum": mediatypes });
                if !mediatypes.contains(&Value::Null) {
                    alternative["required"].as_array_mut().expect("required").push(json!("mediatype"));
                }
            }
            alternatives.push(alternative);
        }
    }
    let rule = json!({ "anyOf": alternatives });
    if form {
        // A file part comes with `mimetype` (a form has no null: the untyped case has none).
        return json!({ "allOf": [rule, { "dependentRequired": { "file": ["mimetype"] } }] });
    }
    rule
}

/// `sendMedia`'s rule: the MIME type fits `mediatype` (any for a document, or when the
/// kind is chosen from the file's name).
pub(super) fn media_rules(form: bool) -> Value {
    mime_rule(
        "media",
        &[
            (&[json!("image")], "image"),
            (&[json!("video")], "video"),
            (&[json!("audio")], "audio"),
            (&[json!("document"), Value::Null], ""),
        ],
        form,
    )
}

/// The file field, or a multipart `file` part (which wins when both are given).
pub(super) fn file_or(field: &str) -> Value {
    json!({ "anyOf": [given(field, json!({ "type": "string" })), given("file", json!({}))] })
}

crate::described!(
    /// Body of `sendMedia` as JSON.
    SendMediaBody refs = [SendMediaIn],
    json!({ "allOf": [crate::schema_ref::<SendMediaIn>(), media_rules(false), everyone_rule()] })
);

crate::described!(
    /// `sendMedia` as `multipart/form-data`: the file as `media` or as the `file` part.
    SendMediaFormBody refs = [SendMediaForm],
    json!({ "allOf": [crate::schema_ref::<SendMediaForm>(), file_or("media"), media_rules(true)] })
);

/// A `data:` URL's MIME type.
pub(super) fn data_url_mime(value: &str) -> Option<&str> {
    split_data_url(value).map(|(mt, _)| mt)
}

/// A `data:<type>;base64,<data>` URL's type and data.
pub(super) fn split_data_url(value: &str) -> Option<(&str, &str)> {
    value.strip_prefix("data:").and_then(|r| r.split_once(";base64,"))
}

/// Where a media field's bytes come from: an http(s) URL, or base64 (bare or in a
/// `data:` URL, whose type is taken when `mimetype` is absent).
pub(super) fn media_in(value: String, mime_type: Option<String>, filename: Option<String>) -> MediaIn {
    if value.starts_with("http://") || value.starts_with("https://") {
        return MediaIn { url: Some(value), data: None, mime_type, filename };
    }
    let (mime_type, data) = match split_data_url(&value) {
        Some((mt, data)) => (mime_type.or(Some(mt.to_string())), data.to_string()),
        None => (mime_type, value),
    };
    MediaIn { url: None, data: Some(data), mime_type, filename }
}

/// Send an image, a video, a document (PDF, .xlsx, .xls, ...) or an audio file, from a
/// URL, base64, or a multipart `file` part.
#[utoipa::path(post, path = "/message/sendMedia/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendMediaBody = "application/json"), (SendMediaFormBody = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
pub(super) async fn send_media(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendMediaIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let media = b.media.ok_or_else(|| ApiError::validation("give the file as `media` (a URL or base64) or `file`"))?;
    if b.caption.as_ref().is_some_and(|c| c.chars().count() > shared::message::CAPTION_LIMIT) {
        return Err(ApiError::validation(format!(
            "caption must be at most {} characters",
            shared::message::CAPTION_LIMIT
        )));
    }
    let kind = match b.mediatype.as_deref() {
        Some("image") => MessageType::Image,
        Some("video") => MessageType::Video,
        Some("document") => MessageType::Document,
        Some("audio") => MessageType::Audio,
        Some(_) => return Err(ApiError::validation("mediatype must be image, video, document or audio")),
        None => {
            // A kind the name suggests but the MIME type contradicts goes as a document.
            let named = media_kind(b.file_name.as_deref().unwrap_or(&media));
            let mime = b.mimetype.as_deref().or_else(|| data_url_mime(&media));
            match (named.mime_family(), mime) {
                (Some(family), Some(mime)) if !mime.starts_with(family) => MessageType::Document,
                _ => named,
            }
        }
    };
    let mut m = MessageIn::new(b.number, kind);
    m.caption = b.caption.filter(|c| !c.is_empty() && kind != MessageType::Audio);
    m.media = Some(media_in(media, b.mimetype, b.file_name));
    queue(&s, &a, m, b.options, held.is_some()).await
}

/// The media kind from a file name or URL's extension.
pub(super) fn media_kind(name: &str) -> MessageType {
    let path = name.split(['?', '#']).next().unwrap_or(name).to_ascii_lowercase();
    let ext = path.rsplit('.').next().unwrap_or("");
    match ext {
        "jpg" | "jpeg" | "png" | "gif" | "webp" | "bmp" => MessageType::Image,
        "mp4" | "mov" | "3gp" | "mkv" | "webm" | "avi" => MessageType::Video,
        _ => MessageType::Document,
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendAudioIn {
    /// Phone with country code (or a JID).
    #[schema(value_type = crate::EvoRecipient)]
    pub number: String,
    /// An http(s) address of an audio file (MP3, OGG, M4A, ...; up to 64 MB), or its bytes
    /// in base64 (a `data:` URL, or bare with `mimetype`); sent as a voice note. With a
    /// multipart body, the `file` part instead.
    #[schema(required = true, schema_with = audio_schema)]
    pub audio: Option<String>,
    /// The audio's MIME type (`audio/...`, up to 127 bytes): required with bare base64 or
    /// a `file` part not typed as audio.
    #[schema(max_length = 127, pattern = "^audio/")]
    pub mimetype: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

pub(super) fn audio_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::json_schema(media_forms(
        "audio",
        true,
        "An http(s) address of an audio file (up to 64 MB), or its bytes in base64 (a `data:audio/...` URL, or bare with `mimetype`).",
    ))
}

crate::described!(
    /// Body of `sendWhatsAppAudio` as JSON.
    SendAudioBody refs = [SendAudioIn],
    json!({ "allOf": [crate::schema_ref::<SendAudioIn>(), mime_rule("audio", &[(&[], "audio")], false), everyone_rule()] })
);

crate::described!(
    /// `sendWhatsAppAudio` as `multipart/form-data`: the file as `audio` or as the `file`
    /// part.
    SendAudioFormBody refs = [SendAudioForm],
    json!({ "allOf": [crate::schema_ref::<SendAudioForm>(), file_or("audio"), mime_rule("audio", &[(&[], "audio")], true)] })
);

/// Send a voice note from an audio file.
#[utoipa::path(post, path = "/message/sendWhatsAppAudio/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendAudioBody = "application/json"), (SendAudioFormBody = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
pub(super) async fn send_audio(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendAudioIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let audio = b.audio.ok_or_else(|| ApiError::validation("give the audio as `audio` (a URL or base64) or `file`"))?;
    let mut m = MessageIn::new(b.number, MessageType::Voice);
    m.media = Some(media_in(audio, b.mimetype, None));
    queue(&s, &a, m, b.options, held.is_some()).await
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendStickerIn {
    /// Phone with country code (or a JID).
    #[schema(value_type = crate::EvoRecipient)]
    pub number: String,
    /// An http(s) address of a WebP image, or its bytes in base64 (up to 16 MB). With a
    /// multipart body, the `file` part instead.
    #[schema(required = true, schema_with = sticker_schema)]
    pub sticker: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

pub(super) fn sticker_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::json_schema(media_forms(
        "",
        true,
        "An http(s) address of a WebP image, or its bytes in base64 (bare or a `data:` URL; up to 16 MB).",
    ))
}

crate::described!(
    /// Body of `sendSticker` as JSON.
    SendStickerBody refs = [SendStickerIn],
    json!({ "allOf": [crate::schema_ref::<SendStickerIn>(), everyone_rule()] })
);

crate::described!(
    /// `sendSticker` as `multipart/form-data`: the file as `sticker` or as the `file` part.
    SendStickerFormBody refs = [SendStickerForm],
    json!({ "allOf": [crate::schema_ref::<SendStickerForm>(), file_or("sticker")] })
);

/// Send a sticker (a WebP image).
#[utoipa::path(post, path = "/message/sendSticker/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendStickerBody = "application/json"), (SendStickerFormBody = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
pub(super) async fn send_sticker(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendStickerIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let sticker =
        b.sticker.ok_or_else(|| ApiError::validation("give the sticker as `sticker` (a URL or base64) or `file`"))?;
    let mut m = MessageIn::new(b.number, MessageType::Sticker);
    m.media = Some(media_in(sticker, Some("image/webp".into()), None));
    queue(&s, &a, m, b.options, held.is_some()).await
}

/// Body of `POST /message/sendStatus/{instanceName}` (Evolution's `StatusMessage`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvoStatusIn {
    /// `text`, `image` or `video` (`audio` is refused).
    #[serde(rename = "type")]
    #[schema(schema_with = status_type_schema)]
    pub kind: String,
    /// The text (up to 65,536 bytes), or the media's http(s) URL or `data:` URL.
    pub content: String,
    /// With an image or video: up to 1,024 characters.
    #[schema(max_length = 1024)]
    pub caption: Option<String>,
    /// Accepted; statuses go to the account's contacts (as `POST /v1/instances/{id}/status`).
    pub all_contacts: Option<bool>,
    /// Accepted and ignored.
    pub status_jid_list: Option<Vec<String>>,
    /// Accepted and ignored.
    pub background_color: Option<String>,
    /// Accepted and ignored.
    #[schema(value_type = Option<Value>)]
    pub font: Option<serde_json::Value>,
}

pub(super) fn status_type_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::json_schema(json!({
        "type": "string", "enum": ["text", "image", "video"],
        "description": "`text`, `image` or `video` (`audio` is refused).",
    }))
}

crate::described!(
    /// Body of `sendStatus`: a text, or an image or video by URL (or a `data:` URL).
    EvoStatusBody refs = [EvoStatusIn],
    json!({ "allOf": [crate::schema_ref::<EvoStatusIn>(), { "oneOf": [
        { "type": "object", "required": ["type", "content"], "properties": {
            "type": { "enum": ["text"] },
            "content": { "type": "string", "minLength": 1, "maxLength": 65_536 },
            "caption": { "type": "null" } } },
        { "type": "object", "required": ["type", "content"], "properties": {
            "type": { "enum": ["image"] }, "content": media_forms("image", false, "the image") } },
        { "type": "object", "required": ["type", "content"], "properties": {
            "type": { "enum": ["video"] }, "content": media_forms("video", false, "the video") } },
    ] }] })
);

/// Post a status (as `POST /v1/instances/{id}/status`): queued and paced like any send.
#[utoipa::path(post, path = "/message/sendStatus/{instanceName}", tag = "evolution", operation_id = "evolution_message_sendStatus",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = EvoStatusBody,
    responses((status = 200, description = "queued: `{key, status, messageId, serviceId}`", body = Object), crate::EvolutionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
pub(super) async fn send_status(
    State(s): State<AppState>,
    a: crate::ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionJson(b): ActionJson<EvoStatusIn>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if b.kind == "text" && b.content.len() > shared::message::TEXT_LIMIT {
        let limit = shared::message::TEXT_LIMIT;
        return Err(ApiError::validation(format!("content (a text) must be at most {limit} bytes")));
    }
    let (kind, text, media) = match b.kind.as_str() {
        "text" => (MessageType::Text, Some(b.content), None),
        "image" => (MessageType::Image, None, Some(media_in(b.content, None, None))),
        "video" => (MessageType::Video, None, Some(media_in(b.content, None, None))),
        _ => return Err(ApiError::validation("type must be text, image or video (audio statuses are not offered)")),
    };
    let status = domain::send::status(kind, text, media, b.caption, None);
    let (row, _) = domain::send::queue(a.ctx(&s), status, None, held.is_some()).await?;
    let m = row.view();
    // (The network id shows once sent: `GET /v1/instances/{id}/messages/{serviceId}`.)
    Ok(Json(serde_json::json!({
        "key": { "remoteJid": shared::jid::STATUS_JID, "fromMe": true, "id": m.wa_message_id },
        "status": evolution_shape::status(m.status.as_str()),
        "serviceId": m.id,
        "messageTimestamp": m.created_at.timestamp(),
    })))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendPtvIn {
    /// Phone with country code (or a JID).
    #[schema(value_type = crate::EvoRecipient)]
    pub number: String,
    /// An http(s) address of an MP4 video, or its bytes in base64 (up to 64 MB). With a
    /// multipart body, the `file` part instead.
    #[schema(required = true, schema_with = ptv_schema)]
    pub video: Option<String>,
    #[serde(flatten)]
    pub options: SendOptions,
}

pub(super) fn ptv_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    crate::json_schema(media_forms(
        "",
        true,
        "An http(s) address of an MP4 video, or its bytes in base64 (bare or a `data:` URL; up to 64 MB).",
    ))
}

crate::described!(
    /// Body of `sendPtv` as JSON.
    SendPtvBody refs = [SendPtvIn],
    json!({ "allOf": [crate::schema_ref::<SendPtvIn>(), everyone_rule()] })
);

crate::described!(
    /// `sendPtv` as `multipart/form-data`: the file as `video` or as the `file` part.
    SendPtvFormBody refs = [SendPtvForm],
    json!({ "allOf": [crate::schema_ref::<SendPtvForm>(), file_or("video")] })
);

impl FileField for SendPtvIn {
    const FILE_FIELD: &'static str = "video";
    const FAMILY: &'static str = "";
    const FORM_FIELDS: &'static [&'static str] = &[];
}

/// A round video note: sent as an ordinary video (paceline's messages have no round
/// kind; docs/evolution.md).
#[utoipa::path(post, path = "/message/sendPtv/{instanceName}", tag = "evolution", operation_id = "evolution_message_sendPtv",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body(content((SendPtvBody = "application/json"), (SendPtvFormBody = "multipart/form-data"))),
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
pub(super) async fn send_ptv(
    State(s): State<AppState>,
    a: ActionAccess,
    held: Option<axum::Extension<SlotHeld>>,
    ActionBody(b): ActionBody<SendPtvIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    let video = b.video.ok_or_else(|| ApiError::validation("give the video as `video` (a URL or base64) or `file`"))?;
    let mut m = MessageIn::new(b.number, MessageType::Video);
    m.media = Some(media_in(video, Some("video/mp4".into()), None));
    queue(&s, &a, m, b.options, held.is_some()).await
}
