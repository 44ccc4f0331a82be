//! Routes of interface.md whose milestones are still to come: labels and channels. Each checks its token like the finished routes
//! (401, 403) and then answers 501 `not_implemented`, so clients can tell "not yet"
//! from "no such route". The WhatsApp driver already carries the network side of
//! labels and channels (`shared::bus::NetOp`).

use shared::error::ErrorBody;
use shared::ApiError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::InstanceAccess;
use crate::state::AppState;

/// One pending route: its handler checks the token with `$auth`, then answers 501.
macro_rules! later {
    ($name:ident, $method:ident, $path:literal, $tag:literal, $summary:literal, $auth:ty, [$($scheme:literal),+]) => {
        #[doc = $summary]
        #[utoipa::path($method, path = $path, tags = [$tag, "later"],
            description = "Not built yet: answers 501 `not_implemented` once the token is accepted.",
            responses(
                (status = 501, description = "`not_implemented`: this route comes in a later milestone", body = ErrorBody),
                (status = 401, description = "`unauthorized`", body = ErrorBody),
                (status = 403, description = "`forbidden`: another instance, or an instance token on an admin route", body = ErrorBody),
            ),
            security($(($scheme = [])),+))]
        async fn $name(_: $auth) -> ApiError {
            ApiError::not_implemented($summary)
        }
    };
}

later!(
    list_labels,
    get,
    "/v1/instances/{id}/labels",
    "labels",
    "Listing labels",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    create_label,
    post,
    "/v1/instances/{id}/labels",
    "labels",
    "Creating a label",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    edit_label,
    patch,
    "/v1/instances/{id}/labels/{label_id}",
    "labels",
    "Editing a label",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    delete_label,
    delete,
    "/v1/instances/{id}/labels/{label_id}",
    "labels",
    "Deleting a label",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    label_chat,
    put,
    "/v1/instances/{id}/labels/{label_id}/chats/{jid}",
    "labels",
    "Labelling a chat",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    unlabel_chat,
    delete,
    "/v1/instances/{id}/labels/{label_id}/chats/{jid}",
    "labels",
    "Removing a label from a chat",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    label_message,
    put,
    "/v1/instances/{id}/labels/{label_id}/messages/{msg_id}",
    "labels",
    "Labelling a message",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    unlabel_message,
    delete,
    "/v1/instances/{id}/labels/{label_id}/messages/{msg_id}",
    "labels",
    "Removing a label from a message",
    InstanceAccess,
    ["admin", "instance"]
);

later!(
    list_channels,
    get,
    "/v1/instances/{id}/channels",
    "channels",
    "Listing followed channels",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    create_channel,
    post,
    "/v1/instances/{id}/channels",
    "channels",
    "Creating a channel",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    preview_channel,
    post,
    "/v1/instances/{id}/channels/preview",
    "channels",
    "A channel by invite link",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    get_channel,
    get,
    "/v1/instances/{id}/channels/{jid}",
    "channels",
    "Channel metadata",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    channel_action,
    post,
    "/v1/instances/{id}/channels/{jid}/{action}",
    "channels",
    "Following, unfollowing or muting a channel",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    channel_posts,
    get,
    "/v1/instances/{id}/channels/{jid}/messages",
    "channels",
    "Channel posts",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    publish_post,
    post,
    "/v1/instances/{id}/channels/{jid}/messages",
    "channels",
    "Publishing to a channel",
    InstanceAccess,
    ["admin", "instance"]
);
later!(
    react_post,
    post,
    "/v1/instances/{id}/channels/{jid}/reactions",
    "channels",
    "Reacting to a channel post",
    InstanceAccess,
    ["admin", "instance"]
);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_labels, create_label))
        .routes(routes!(edit_label, delete_label))
        .routes(routes!(label_chat, unlabel_chat))
        .routes(routes!(label_message, unlabel_message))
        .routes(routes!(list_channels, create_channel))
        .routes(routes!(preview_channel))
        .routes(routes!(get_channel))
        .routes(routes!(channel_action))
        .routes(routes!(channel_posts, publish_post))
        .routes(routes!(react_post))
}
