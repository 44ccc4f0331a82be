//! Routes of interface.md whose milestones are still to come: channels. Each checks its token like the finished routes
//! (401, 403) and then answers 501 `not_implemented`, so clients can tell "not yet"
//! from "no such route". The WhatsApp driver already carries the network side of
//! channels (`shared::bus::NetOp`).

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
        .routes(routes!(list_channels, create_channel))
        .routes(routes!(preview_channel))
        .routes(routes!(get_channel))
        .routes(routes!(channel_action))
        .routes(routes!(channel_posts, publish_post))
        .routes(routes!(react_post))
}
