//! The media routes' bodies as JSON or `multipart/form-data` (Evolution's clients send
//! files both ways), and the forms the description shows for them.

use super::*;

/// The multipart forms of the media routes, as the description shows them (a form is
/// read into the JSON body's type, `ActionBody`): the other fields as text parts, the
/// file's bytes in the `file` part instead of the URL or base64 field.
macro_rules! multipart_form {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Deserialize, ToSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        #[allow(dead_code)]
        pub struct $name {
            /// Phone with country code (or a JID).
            #[schema(value_type = crate::EvoRecipient)]
            pub number: String,
            /// The file's bytes (or give the URL or base64 in the text field; this part
            /// wins when both are given).
            #[schema(value_type = String, format = Binary, min_length = 1, required = false)]
            pub file: Option<Vec<u8>>,
            $($(#[$fdoc])* pub $field: Option<String>,)*
            /// Milliseconds Evolution waits before sending (0-300000); pacing decides.
            #[schema(value_type = String, required = false, pattern = "^([0-2]?[0-9]{1,5}|300000)$")]
            pub delay: Option<String>,
        }
    };
}

multipart_form!(
    /// `sendMedia`'s fields as `multipart/form-data`.
    SendMediaForm {
        /// Up to 1,024 characters (not sent with audio).
        #[schema(value_type = String, required = false, max_length = 1024)]
        caption,
        /// An http(s) address of the file, or its bytes in base64 (a `data:` URL, or bare
        /// with `mimetype`); or the `file` part instead.
        #[schema(schema_with = any_media_schema)]
        media,
        /// `image`, `video`, `document` or `audio` (see the JSON body).
        #[schema(schema_with = mediatype_form_schema)]
        mediatype,
        /// The file's MIME type (up to 127 bytes), of the family `mediatype` names;
        /// required with bare base64 or a `file` part.
        #[schema(value_type = String, required = false, max_length = 127)]
        mimetype,
        /// A plain file name: 1-255 bytes, no `/` or backslash.
        #[schema(value_type = String, required = false, min_length = 1, max_length = 255, pattern = r"^[^/\\]+$")]
        file_name,
    }
);
multipart_form!(
    /// `sendWhatsAppAudio`'s fields as `multipart/form-data`.
    SendAudioForm {
        /// An http(s) address of an audio file, or its bytes in base64 (a `data:audio/...`
        /// URL, or bare with `mimetype`); or the `file` part instead.
        #[schema(schema_with = audio_schema)]
        audio,
        /// The audio's MIME type (`audio/...`): required with bare base64 or a `file` part.
        #[schema(value_type = String, required = false, max_length = 127, pattern = "^audio/")]
        mimetype,
    }
);
multipart_form!(
    /// `sendSticker`'s fields as `multipart/form-data`.
    SendStickerForm {
        /// An http(s) address of a WebP image, or its bytes in base64; or the `file` part
        /// instead.
        #[schema(schema_with = sticker_schema)]
        sticker,
    }
);
multipart_form!(
    /// `sendPtv`'s fields as `multipart/form-data`.
    SendPtvForm {
        /// An http(s) address of an MP4 video, or its bytes in base64; or the `file` part
        /// instead.
        #[schema(schema_with = ptv_schema)]
        video,
    }
);

/// A body as JSON or, as Evolution's clients send media, `multipart/form-data`: its text
/// parts become string fields, and its `file` part, in base64, the field `file_field`
/// names (`T::FILE_FIELD`). Every refusal is 400.
pub struct ActionBody<T>(pub T);

/// The field a multipart body's `file` part fills.
pub trait FileField {
    const FILE_FIELD: &'static str;
    /// The MIME family of a `data:` URL in that field (empty: any).
    const FAMILY: &'static str;
    /// The form's other text fields, besides `number` and `delay`.
    const FORM_FIELDS: &'static [&'static str];
}

impl FileField for SendMediaIn {
    const FILE_FIELD: &'static str = "media";
    const FAMILY: &'static str = "";
    const FORM_FIELDS: &'static [&'static str] = &["caption", "mediatype", "mimetype", "fileName"];
}

impl FileField for SendAudioIn {
    const FILE_FIELD: &'static str = "audio";
    const FAMILY: &'static str = "audio";
    const FORM_FIELDS: &'static [&'static str] = &["mimetype"];
}

impl FileField for SendStickerIn {
    const FILE_FIELD: &'static str = "sticker";
    const FAMILY: &'static str = "";
    const FORM_FIELDS: &'static [&'static str] = &[];
}

/// Whether `s` has one of the forms [`media_forms`] declares (bare base64 taken): an
/// http(s) URL, a `data:` URL of a type of `family` (any when empty), or base64.
pub(super) fn media_shape_ok(s: &str, family: &str) -> bool {
    let base64 = |d: &str| !d.is_empty() && base64::engine::general_purpose::STANDARD.decode(d).is_ok();
    if s.starts_with("http://") || s.starts_with("https://") {
        // As `HTTP_URL_PATTERN` reads one: printable ASCII that parses, with a host.
        return s.bytes().all(|b| b.is_ascii_graphic()) && url::Url::parse(s).is_ok_and(|u| u.host_str().is_some());
    }
    if let Some((mime, data)) = split_data_url(s) {
        let Some((kind, sub)) = mime.split_once('/') else { return false };
        let kind_ok = if family.is_empty() {
            (1..=63).contains(&kind.chars().count()) && !kind.contains([',', ';'])
        } else {
            kind == family
        };
        return kind_ok && sub.chars().count() <= 63 && !sub.contains(',') && base64(data);
    }
    base64(s)
}

impl<S, T> axum::extract::FromRequest<S> for ActionBody<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned + FileField,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let multipart = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("multipart/form-data"));
        if !multipart {
            return ActionJson::<T>::from_request(req, state).await.map(|ActionJson(t)| ActionBody(t));
        }
        let bad = |e: &dyn std::fmt::Display| as_400(ApiError::validation(format!("unreadable multipart body: {e}")));
        let mut form = axum::extract::Multipart::from_request(req, state).await.map_err(|e| bad(&e))?;
        let mut fields = serde_json::Map::new();
        // The `file` part wins over the field it fills, in whichever order they come; the
        // field is checked all the same.
        let mut file_part = false;
        let mut file_text: Option<String> = None;
        while let Some(part) = form.next_field().await.map_err(|e| bad(&e))? {
            let Some(name) = part.name().map(str::to_string) else { continue };
            let known = ["number", "delay", "file", T::FILE_FIELD].contains(&name.as_str())
                || T::FORM_FIELDS.contains(&name.as_str());
            if !known {
                let shown: String = name.chars().take(40).collect();
                return Err(as_400(ApiError::validation(format!("unknown form field {shown:?}"))));
            }
            if name == "file" {
                file_part = true;
                let mime = part.content_type().map(str::to_string);
                let bytes = part.bytes().await.map_err(|e| bad(&e))?;
                let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
                // A part typed as a file's type gives the type when no field does.
                if let Some(mt) = mime.filter(|m| m != "application/octet-stream") {
                    fields.entry("mimetype").or_insert(serde_json::Value::String(mt));
                }
                fields.insert(T::FILE_FIELD.into(), serde_json::Value::String(data));
            } else {
                let text = part.text().await.map_err(|e| bad(&e))?;
                if text.contains('\0') || name.contains('\0') {
                    return Err(as_400(ApiError::validation("form fields must not contain the NUL character")));
                }
                if name == T::FILE_FIELD {
                    file_text = Some(text);
                } else {
                    fields.insert(name, serde_json::Value::String(text));
                }
            }
        }
        if let Some(text) = file_text {
            if !file_part {
                fields.insert(T::FILE_FIELD.into(), serde_json::Value::String(text));
            } else if !media_shape_ok(&text, T::FAMILY) {
                let field = T::FILE_FIELD;
                return Err(as_400(ApiError::validation(format!(
                    "{field} must be an http(s) URL or base64 (bare or a data: URL)"
                ))));
            }
        }
        serde_json::from_value(serde_json::Value::Object(fields))
            .map(ActionBody)
            .map_err(|e| as_400(ApiError::validation(format!("invalid body: {e}"))))
    }
}
