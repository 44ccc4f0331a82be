//! `sendContact`: contact cards as Evolution gives them, checked and queued as
//! `POST {inst}/messages` takes them.

use super::*;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SendContactIn {
    /// Phone with country code (or a JID).
    #[schema(value_type = crate::EvoRecipient)]
    pub number: String,
    /// The seed's fields: one card from `contactName` and `contactPhone` (up to 1,024
    /// bytes, not blank).
    #[schema(min_length = 1, max_length = 1024, pattern = r"[^\s\u0085]")]
    pub contact_name: Option<String>,
    /// The card's phone number with country code.
    #[schema(value_type = Option<crate::EvoRecipient>)]
    pub contact_phone: Option<String>,
    /// Up to 1,024 bytes (with `contactName`).
    #[schema(max_length = 1024)]
    pub organization: Option<String>,
    /// Up to 1,024 bytes (with `contactName`).
    #[schema(max_length = 1024)]
    pub email: Option<String>,
    /// Up to 1,024 bytes (with `contactName`).
    #[schema(max_length = 1024)]
    pub url: Option<String>,
    /// Evolution's: the card (one per message).
    #[schema(min_items = 1, max_items = 1, value_type = Option<Vec<EvolutionContactCard>>)]
    pub contact: Option<Vec<EvolutionContact>>,
    #[serde(flatten)]
    pub options: SendOptions,
}

/// One contact card as Evolution takes it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvolutionContact {
    /// Up to 1,024 bytes, not blank.
    #[schema(min_length = 1, max_length = 1024, pattern = r"[^\s\u0085]")]
    pub full_name: String,
    /// The contact's WhatsApp number (digits); `phoneNumber` when absent.
    #[schema(value_type = Option<crate::EvoRecipient>)]
    pub wuid: Option<String>,
    /// The card's phone number with country code.
    #[schema(value_type = Option<crate::EvoRecipient>)]
    pub phone_number: Option<String>,
    /// Up to 1,024 bytes.
    #[schema(max_length = 1024)]
    pub organization: Option<String>,
    /// Up to 1,024 bytes.
    #[schema(max_length = 1024)]
    pub email: Option<String>,
    /// Up to 1,024 bytes.
    #[schema(max_length = 1024)]
    pub url: Option<String>,
}

crate::described!(
    /// One contact card as Evolution takes it: with `phoneNumber`, `wuid`, or both.
    EvolutionContactCard refs = [EvolutionContact],
    json!({ "allOf": [
        crate::schema_ref::<EvolutionContact>(),
        { "anyOf": [given("phoneNumber", json!({ "type": "string" })), given("wuid", json!({ "type": "string" }))] },
    ] })
);

crate::described!(
    /// Body of `sendContact`: `contactName` and `contactPhone`, or Evolution's `contact`.
    SendContactBody refs = [SendContactIn],
    json!({ "allOf": [
        crate::schema_ref::<SendContactIn>(),
        { "oneOf": [
            { "type": "object", "required": ["contactName", "contactPhone"], "properties": {
                "contactName": { "type": "string" }, "contactPhone": { "type": "string" }, "contact": { "type": "null" } } },
            { "type": "object", "required": ["contact"], "properties": {
                "contact": { "type": "array" }, "contactName": { "type": "null" }, "contactPhone": { "type": "null" } } },
        ] },
        everyone_rule(),
    ] })
);

/// Send a contact card (the contact need not be saved).
#[utoipa::path(post, path = "/message/sendContact/{instanceName}", tag = "actions",
    params(("instanceName" = String, Path, description = "the instance's name")),
    request_body = SendContactBody,
    responses((status = 200, description = "queued", body = SendActionOut), ActionErrors),
    security(("api_key" = []), ("evolution_apikey" = [])))]
pub(super) async fn send_contact(
    State(s): State<AppState>,
    a: ActionAccess,
    ActionJson(b): ActionJson<SendContactIn>,
) -> Result<Json<SendActionOut>, ApiError> {
    // The card's fields given at the top are checked whichever form the card takes.
    for (field, v) in [("organization", &b.organization), ("email", &b.email), ("url", &b.url)] {
        if let Some(v) = v {
            domain::message_in::check_len(field, v, shared::message::FIELD_LIMIT)?;
        }
    }
    let card = match (b.contact_name, b.contact_phone, b.contact) {
        (Some(name), Some(phone), None) => {
            ContactIn { name, phone, organization: b.organization, email: b.email, url: b.url }
        }
        (None, None, Some(mut list)) if list.len() == 1 => {
            let c = list.remove(0);
            // `wuid` is checked also when `phoneNumber` is the one used.
            if let Some(w) = &c.wuid {
                domain::message_in::normalize_jid(w)
                    .map_err(|_| ApiError::validation("contact.wuid must be a phone number with country code"))?;
            }
            let phone =
                c.phone_number.or(c.wuid).ok_or_else(|| ApiError::validation("contact needs phoneNumber or wuid"))?;
            ContactIn { name: c.full_name, phone, organization: c.organization, email: c.email, url: c.url }
        }
        (None, None, Some(_)) => {
            return Err(ApiError::validation("contact must hold exactly one card (one card per message)"))
        }
        _ => return Err(ApiError::validation("give contactName and contactPhone, or Evolution's contact")),
    };
    let mut m = MessageIn::new(b.number, MessageType::Contact);
    m.contact = Some(card);
    queue(&s, &a, m, b.options, false).await
}
