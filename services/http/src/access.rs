//! Who reaches each route: one row per operation of the API. Restricted API keys are
//! checked against it on every request (a route without a row is refused to every
//! key), the OpenAPI description's `restricted_key` requirements are derived from it,
//! and the auth-matrix test checks every answer of every operation, for every kind of
//! token, against it; an operation without its row fails that test.

use axum::http::Method;
use shared::db::api_keys::KeyScope;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The token is not looked at (health on loopback, signed media URLs).
    Open,
    /// Any valid token: the admin, an instance token, any key (identity, the description).
    AnyToken,
    /// The admin token only.
    Admin,
    /// The admin or an account token (on `/v1/accounts/{account_id}` routes, its own account's
    /// only; on the instance list and creation, its own instances).
    Account,
    /// The admin or the instance's own token; no key.
    Owner,
    /// Also `read_only` keys of the instance.
    Read,
    /// Also `send_only` keys of the instance.
    Send,
    /// Also keys of either scope.
    ReadSend,
}

impl Access {
    /// Whether a key of `scope` reaches a route of this kind.
    pub fn admits(self, scope: KeyScope) -> bool {
        match self {
            Access::AnyToken | Access::ReadSend => true,
            Access::Read => scope == KeyScope::ReadOnly,
            Access::Send => scope == KeyScope::SendOnly,
            Access::Open | Access::Admin | Access::Account | Access::Owner => false,
        }
    }

    /// Whether an account token reaches a route of this kind (on an instance route, the
    /// instance must be in its account).
    pub fn admits_account(self) -> bool {
        !matches!(self, Access::Open | Access::Admin)
    }

    /// Whether a call of `method` to `path`, a route of this kind, only reads (what a
    /// suspended account's token may still do): a `Read` route, or a `GET` that is not
    /// one of [`GETS_THAT_ACT`].
    pub fn reads(self, method: &Method, path: &str) -> bool {
        self == Access::Read || (matches!(*method, Method::GET | Method::HEAD) && !GETS_THAT_ACT.contains(&path))
    }

    /// The key scopes it admits.
    pub fn scopes(self) -> Vec<KeyScope> {
        [KeyScope::ReadOnly, KeyScope::SendOnly].into_iter().filter(|s| self.admits(*s)).collect()
    }
}

use Access::*;

/// Evolution's `GET` routes that act (they start a session, join a group): never reads.
pub const GETS_THAT_ACT: &[&str] = &["/instance/connect/{instanceName}", "/group/acceptInviteCode/{instanceName}"];

/// Every operation: method, path (as the router and the OpenAPI description spell it),
/// access.
pub const ROUTES: &[(&str, &str, Access)] = &[
    // Operation.
    ("GET", "/healthz", Open),
    ("GET", "/readyz", Open),
    ("GET", "/v1/me", AnyToken),
    ("GET", "/v1/openapi.json", AnyToken),
    ("GET", "/media/{media_id}", Open),
    // The instance list and the whole cluster's events.
    ("GET", "/v1/instances", Account),
    ("POST", "/v1/instances", Account),
    ("POST", "/v1/instances/bulk", Admin),
    ("GET", "/v1/events", Admin),
    ("GET", "/v1/cluster", Admin),
    // Accounts: the admin's, read (and their tokens rotated) by their own tokens too.
    ("GET", "/v1/accounts", Admin),
    ("POST", "/v1/accounts", Admin),
    ("GET", "/v1/accounts/{account_id}", Account),
    ("PATCH", "/v1/accounts/{account_id}", Admin),
    ("DELETE", "/v1/accounts/{account_id}", Admin),
    ("GET", "/v1/accounts/{account_id}/usage", Account),
    ("GET", "/v1/accounts/{account_id}/media/retention", Account),
    ("GET", "/v1/accounts/{account_id}/chatwoot", Account),
    ("PUT", "/v1/accounts/{account_id}/chatwoot", Account),
    ("PATCH", "/v1/accounts/{account_id}/chatwoot", Account),
    ("DELETE", "/v1/accounts/{account_id}/chatwoot", Account),
    ("GET", "/v1/accounts/{account_id}/rabbitmq", Account),
    ("PUT", "/v1/accounts/{account_id}/rabbitmq", Account),
    ("DELETE", "/v1/accounts/{account_id}/rabbitmq", Account),
    ("PUT", "/v1/accounts/{account_id}/media/retention", Admin),
    ("GET", "/v1/accounts/{account_id}/usage/export", Account),
    ("GET", "/v1/accounts/{account_id}/tokens", Account),
    ("POST", "/v1/accounts/{account_id}/tokens", Account),
    ("DELETE", "/v1/accounts/{account_id}/tokens/{token_id}", Account),
    ("GET", "/v1/accounts/{account_id}/events", Account),
    ("GET", "/v1/accounts/{account_id}/webhooks", Account),
    ("POST", "/v1/accounts/{account_id}/webhooks", Account),
    ("GET", "/v1/accounts/{account_id}/webhooks/{webhook_id}", Account),
    ("PATCH", "/v1/accounts/{account_id}/webhooks/{webhook_id}", Account),
    ("DELETE", "/v1/accounts/{account_id}/webhooks/{webhook_id}", Account),
    ("GET", "/v1/accounts/{account_id}/webhooks/{webhook_id}/deliveries", Account),
    ("GET", "/v1/accounts/{account_id}/webhooks/{webhook_id}/deliveries/{delivery_id}", Account),
    ("POST", "/v1/accounts/{account_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/resend", Account),
    ("PUT", "/v1/instances/{id}/account", Admin),
    // An instance's record, pairing and session.
    ("GET", "/v1/instances/{id}", Read),
    ("PATCH", "/v1/instances/{id}", Owner),
    ("DELETE", "/v1/instances/{id}", Owner),
    ("POST", "/v1/instances/{id}/token", Owner),
    ("POST", "/v1/instances/{id}/connect", Owner),
    ("POST", "/v1/instances/{id}/logout", Owner),
    ("POST", "/v1/instances/{id}/restart", Owner),
    // Pairing binds the instance to whoever scans first: the owner's act alone.
    ("GET", "/v1/instances/{id}/qr", Owner),
    ("POST", "/v1/instances/{id}/pairing-code", Owner),
    // Platform.
    ("GET", "/v1/instances/{id}/api-keys", Owner),
    ("POST", "/v1/instances/{id}/api-keys", Owner),
    ("DELETE", "/v1/instances/{id}/api-keys/{key_id}", Owner),
    ("POST", "/v1/instances/{id}/pairing-links", Admin),
    ("DELETE", "/v1/instances/{id}/pairing-links", Admin),
    ("GET", "/v1/instances/{id}/usage", Read),
    ("GET", "/v1/instances/{id}/media/retention", Owner),
    ("PUT", "/v1/instances/{id}/media/retention", Admin),
    ("GET", "/v1/instances/{id}/states", Read),
    // Messages and number checks.
    ("POST", "/v1/instances/{id}/messages", Send),
    ("GET", "/v1/instances/{id}/messages/{msg_id}", ReadSend),
    ("PATCH", "/v1/instances/{id}/messages/{msg_id}", Send),
    ("POST", "/v1/instances/{id}/messages/{msg_id}/revoke", Send),
    ("POST", "/v1/instances/{id}/check-numbers", Send),
    // Chats.
    ("GET", "/v1/instances/{id}/chats", Read),
    ("GET", "/v1/instances/{id}/chats/{jid}", Read),
    ("PATCH", "/v1/instances/{id}/chats/{jid}", Owner),
    ("DELETE", "/v1/instances/{id}/chats/{jid}", Owner),
    ("GET", "/v1/instances/{id}/chats/{jid}/messages", Read),
    ("POST", "/v1/instances/{id}/chats/{jid}/read", Owner),
    // Contacts.
    ("GET", "/v1/instances/{id}/contacts", Read),
    ("GET", "/v1/instances/{id}/contacts/{jid}", Read),
    ("GET", "/v1/instances/{id}/contacts/{jid}/picture", Read),
    ("GET", "/v1/instances/{id}/contacts/{jid}/profile", Read),
    ("POST", "/v1/instances/{id}/contacts/{jid}/block", Owner),
    ("POST", "/v1/instances/{id}/contacts/{jid}/unblock", Owner),
    ("GET", "/v1/instances/{id}/blocklist", Read),
    // Groups and communities.
    ("GET", "/v1/instances/{id}/groups", Read),
    ("POST", "/v1/instances/{id}/groups", Owner),
    ("POST", "/v1/instances/{id}/groups/join", Owner),
    ("GET", "/v1/instances/{id}/groups/invites/{code}", Read),
    ("GET", "/v1/instances/{id}/groups/{jid}", Read),
    ("PATCH", "/v1/instances/{id}/groups/{jid}", Owner),
    ("GET", "/v1/instances/{id}/groups/{jid}/invite-link", Read),
    ("POST", "/v1/instances/{id}/groups/{jid}/leave", Owner),
    ("POST", "/v1/instances/{id}/groups/{jid}/participants", Owner),
    ("GET", "/v1/instances/{id}/communities", Read),
    ("POST", "/v1/instances/{id}/communities", Owner),
    ("GET", "/v1/instances/{id}/communities/{jid}", Read),
    ("GET", "/v1/instances/{id}/communities/{jid}/groups", Read),
    ("POST", "/v1/instances/{id}/communities/{jid}/groups", Owner),
    ("DELETE", "/v1/instances/{id}/communities/{jid}/groups/{group}", Owner),
    // Profile, privacy, status.
    ("GET", "/v1/instances/{id}/profile", Read),
    ("PATCH", "/v1/instances/{id}/profile", Owner),
    ("PUT", "/v1/instances/{id}/profile/picture", Owner),
    ("DELETE", "/v1/instances/{id}/profile/picture", Owner),
    ("GET", "/v1/instances/{id}/privacy", Read),
    ("PATCH", "/v1/instances/{id}/privacy", Owner),
    ("PUT", "/v1/instances/{id}/presence", Owner),
    ("GET", "/v1/instances/{id}/status", Read),
    ("POST", "/v1/instances/{id}/status", Owner),
    // Labels and the business profile.
    ("GET", "/v1/instances/{id}/risk", Read),
    ("GET", "/v1/instances/{id}/queue", Read),
    ("POST", "/v1/instances/{id}/queue/pause", Owner),
    ("POST", "/v1/instances/{id}/queue/resume", Owner),
    ("GET", "/v1/instances/{id}/attendant", Owner),
    ("PUT", "/v1/instances/{id}/attendant", Owner),
    ("PATCH", "/v1/instances/{id}/attendant", Owner),
    ("DELETE", "/v1/instances/{id}/attendant", Owner),
    ("POST", "/v1/instances/{id}/attendant/chats/{jid}/resume", Owner),
    ("GET", "/v1/instances/{id}/chatwoot", Owner),
    ("PUT", "/v1/instances/{id}/chatwoot", Owner),
    ("PATCH", "/v1/instances/{id}/chatwoot", Owner),
    ("DELETE", "/v1/instances/{id}/chatwoot", Owner),
    ("GET", "/v1/instances/{id}/rabbitmq", Owner),
    ("PUT", "/v1/instances/{id}/rabbitmq", Owner),
    ("DELETE", "/v1/instances/{id}/rabbitmq", Owner),
    ("GET", "/v1/instances/{id}/labels", Read),
    ("POST", "/v1/instances/{id}/labels", Owner),
    ("PATCH", "/v1/instances/{id}/labels/{label_id}", Owner),
    ("DELETE", "/v1/instances/{id}/labels/{label_id}", Owner),
    ("PUT", "/v1/instances/{id}/labels/{label_id}/chats/{jid}", Owner),
    ("DELETE", "/v1/instances/{id}/labels/{label_id}/chats/{jid}", Owner),
    ("PUT", "/v1/instances/{id}/labels/{label_id}/messages/{msg_id}", Owner),
    ("DELETE", "/v1/instances/{id}/labels/{label_id}/messages/{msg_id}", Owner),
    ("GET", "/v1/instances/{id}/business/profile", Read),
    // Channels.
    ("GET", "/v1/instances/{id}/channels", Read),
    ("POST", "/v1/instances/{id}/channels", Owner),
    ("POST", "/v1/instances/{id}/channels/preview", Owner),
    ("GET", "/v1/instances/{id}/channels/{jid}", Read),
    ("GET", "/v1/instances/{id}/channels/{jid}/messages", Read),
    ("POST", "/v1/instances/{id}/channels/{jid}/messages", Owner),
    ("POST", "/v1/instances/{id}/channels/{jid}/reactions", Owner),
    ("POST", "/v1/instances/{id}/channels/{jid}/{action}", Owner),
    // Webhooks, deliveries and the event stream.
    ("GET", "/v1/instances/{id}/webhooks", Read),
    ("POST", "/v1/instances/{id}/webhooks", Owner),
    ("GET", "/v1/instances/{id}/webhooks/{webhook_id}", Read),
    ("PATCH", "/v1/instances/{id}/webhooks/{webhook_id}", Owner),
    ("DELETE", "/v1/instances/{id}/webhooks/{webhook_id}", Owner),
    ("GET", "/v1/instances/{id}/webhooks/{webhook_id}/deliveries", Read),
    ("GET", "/v1/instances/{id}/webhooks/{webhook_id}/deliveries/{delivery_id}", Read),
    ("POST", "/v1/instances/{id}/webhooks/{webhook_id}/deliveries/{delivery_id}/resend", Owner),
    ("GET", "/v1/instances/{id}/events", Read),
    // The hosted pairing page (its link's token is in the path).
    ("GET", "/pair/{token}", Open),
    ("GET", "/pair/{token}/status", Open),
    ("POST", "/pair/{token}/code", Open),
    // Chatwoot's webhook (the inbox's secret is in the path).
    ("POST", "/v1/chatwoot/webhook/{secret}", Open),
    // MCP.
    ("POST", "/mcp", ReadSend),
    // The action-style routes (X-API-Key, or Evolution's apikey).
    ("GET", "/instance/connect/{instanceName}", Owner),
    ("PATCH", "/instance/settings/{instanceName}", Owner),
    ("POST", "/message/sendText/{instanceName}", Send),
    ("POST", "/message/sendMedia/{instanceName}", Send),
    ("POST", "/message/sendWhatsAppAudio/{instanceName}", Send),
    ("POST", "/message/sendLocation/{instanceName}", Send),
    ("POST", "/message/sendContact/{instanceName}", Send),
    ("POST", "/message/sendPoll/{instanceName}", Send),
    ("POST", "/message/sendReaction/{instanceName}", Send),
    ("POST", "/message/sendSticker/{instanceName}", Send),
    ("POST", "/message/sendPtv/{instanceName}", Send),
    ("POST", "/message/sendList/{instanceName}", Send),
    ("POST", "/message/sendButtons/{instanceName}", Send),
    // Evolution v2's routes (`apikey`; docs/evolution.md): each as
    // strict as the `/v1` operation it maps onto.
    ("GET", "/", Open),
    ("POST", "/verify-creds", AnyToken),
    ("GET", "/{integration}/find/{instanceName}", Read),
    ("POST", "/{integration}/set/{instanceName}", Owner),
    ("GET", "/{integration}/fetchSettings/{instanceName}", Read),
    ("POST", "/instance/create", Account),
    ("GET", "/instance/fetchInstances", Owner),
    ("GET", "/instance/connectionState/{instanceName}", Read),
    ("POST", "/instance/restart/{instanceName}", Owner),
    ("DELETE", "/instance/logout/{instanceName}", Owner),
    ("DELETE", "/instance/delete/{instanceName}", Owner),
    ("POST", "/instance/setPresence/{instanceName}", Owner),
    ("POST", "/chat/whatsappNumbers/{instanceName}", Send),
    ("POST", "/chat/checkIsWhatsappNumber/{instanceName}", Send),
    ("POST", "/chat/findMessages/{instanceName}", Read),
    ("POST", "/chat/findChats/{instanceName}", Read),
    ("POST", "/chat/findContacts/{instanceName}", Read),
    ("POST", "/group/create/{instanceName}", Owner),
    ("GET", "/group/fetchAllGroups/{instanceName}", Read),
    ("GET", "/group/findGroupInfos/{instanceName}", Read),
    ("GET", "/group/participants/{instanceName}", Read),
    ("POST", "/group/updateParticipant/{instanceName}", Owner),
    ("GET", "/group/inviteCode/{instanceName}", Read),
    ("POST", "/group/revokeInviteCode/{instanceName}", Owner),
    ("GET", "/group/acceptInviteCode/{instanceName}", Owner),
    ("POST", "/group/updateSetting/{instanceName}", Owner),
    ("POST", "/group/updateGroupSubject/{instanceName}", Owner),
    ("POST", "/group/updateGroupDescription/{instanceName}", Owner),
    ("DELETE", "/group/leaveGroup/{instanceName}", Owner),
    ("GET", "/label/findLabels/{instanceName}", Read),
    ("POST", "/label/handleLabel/{instanceName}", Owner),
    ("POST", "/chat/markMessageAsRead/{instanceName}", Owner),
    ("POST", "/chat/markChatUnread/{instanceName}", Owner),
    ("POST", "/chat/archiveChat/{instanceName}", Owner),
    ("POST", "/chat/sendPresence/{instanceName}", Send),
    ("POST", "/chat/fetchProfilePictureUrl/{instanceName}", Read),
    ("POST", "/chat/fetchProfile/{instanceName}", Read),
    ("POST", "/chat/fetchBusinessProfile/{instanceName}", Read),
    ("POST", "/chat/updateProfileName/{instanceName}", Owner),
    ("POST", "/chat/updateProfileStatus/{instanceName}", Owner),
    ("POST", "/chat/updateProfilePicture/{instanceName}", Owner),
    ("DELETE", "/chat/removeProfilePicture/{instanceName}", Owner),
    ("GET", "/chat/fetchPrivacySettings/{instanceName}", Read),
    ("POST", "/chat/updatePrivacySettings/{instanceName}", Owner),
    ("POST", "/message/updateBlockStatus/{instanceName}", Owner),
    ("DELETE", "/chat/deleteMessageForEveryone/{instanceName}", Owner),
    ("POST", "/chat/updateMessage/{instanceName}", Owner),
    ("POST", "/settings/set/{instanceName}", Owner),
    ("GET", "/settings/find/{instanceName}", Read),
    ("POST", "/proxy/set/{instanceName}", Admin),
    ("GET", "/proxy/find/{instanceName}", Owner),
    ("POST", "/message/sendStatus/{instanceName}", Owner),
    ("POST", "/chat/findStatusMessage/{instanceName}", Read),
    ("POST", "/chat/getBase64FromMediaMessage/{instanceName}", Read),
    ("POST", "/group/updateGroupPicture/{instanceName}", Owner),
    ("GET", "/group/inviteInfo/{instanceName}", Read),
    ("POST", "/group/sendInvite/{instanceName}", Owner),
    ("POST", "/group/toggleEphemeral/{instanceName}", Owner),
    ("POST", "/webhook/set/{instanceName}", Owner),
    ("GET", "/webhook/find/{instanceName}", Read),
    ("POST", "/chatwoot/set/{instanceName}", Owner),
    ("POST", "/rabbitmq/set/{instanceName}", Owner),
    ("GET", "/rabbitmq/find/{instanceName}", Owner),
    ("GET", "/chatwoot/find/{instanceName}", Owner),
];

/// The access of an operation, if it has a row.
pub fn of(method: &Method, path: &str) -> Option<Access> {
    ROUTES.iter().find(|(m, p, _)| *m == method.as_str() && *p == path).map(|(_, _, a)| *a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_reach_what_their_kind_says() {
        assert!(Read.admits(KeyScope::ReadOnly) && !Read.admits(KeyScope::SendOnly));
        assert!(Send.admits(KeyScope::SendOnly) && !Send.admits(KeyScope::ReadOnly));
        assert_eq!(ReadSend.scopes().len(), 2);
        assert!(Owner.scopes().is_empty() && Admin.scopes().is_empty() && Open.scopes().is_empty());
        assert_eq!(of(&Method::GET, "/v1/instances/{id}/api-keys"), Some(Owner));
        assert_eq!(of(&Method::PUT, "/v1/instances/{id}/api-keys"), None);
    }
}
