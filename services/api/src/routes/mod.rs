//! Every route, merged in one place. One module per resource, each exporting `router()`.

pub mod access;
pub mod actions;
pub mod api_keys;
pub mod attendant;
pub mod bulk;
pub mod business;
pub mod channels;
pub mod chats;
pub mod communities;
pub mod contacts;
pub mod events;
pub mod groups;
pub mod health;
pub mod instances;
pub mod labels;
pub mod mcp;
pub mod me;
pub mod media;
pub mod messages;
pub mod numbers;
pub mod openapi;
pub mod pair_page;
pub mod pairing;
pub mod pairing_links;
pub mod profile;
pub mod risk;
pub mod status;
pub mod usage;
pub mod webhooks;

use axum::http::Method;
use shared::{ApiError, ErrorCode};
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

/// The body limit of every route but `POST {inst}/messages`.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// All routes with their OpenAPI description.
pub fn all() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::base())
        .merge(me::router())
        .merge(instances::router())
        .merge(bulk::router())
        .merge(pairing::router())
        .merge(messages::router())
        .merge(actions::router())
        .merge(numbers::router())
        .merge(api_keys::router())
        .merge(pairing_links::router())
        .merge(pair_page::router())
        .merge(usage::router())
        .merge(webhooks::router())
        .merge(events::router())
        .merge(chats::router())
        .merge(contacts::router())
        .merge(groups::router())
        .merge(communities::router())
        .merge(profile::router())
        .merge(business::router())
        .merge(labels::router())
        .merge(channels::router())
        .merge(status::router())
        .merge(attendant::router())
        .merge(risk::router())
        .merge(media::router())
        .merge(mcp::router())
        .merge(health::router())
        .merge(openapi::router())
}

/// Unknown routes get the envelope too.
pub async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such route")
}

/// Known routes called with another method.
pub async fn method_not_allowed(method: Method) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("method {method} is not allowed on this route"))
}
