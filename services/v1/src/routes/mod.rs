//! Every `/v1` route, merged in one place. One module per resource, each exporting
//! `router()`.

pub mod account_webhooks;
pub mod accounts;
pub mod api_keys;
pub mod attendant;
pub mod bulk;
pub mod business;
pub mod channels;
pub mod chats;
pub mod chatwoot;
pub mod cluster;
pub mod communities;
pub mod contacts;
pub mod events;
pub mod groups;
pub mod health;
pub mod instances;
pub mod labels;
pub mod me;
pub mod media;
pub mod media_retention;
pub mod messages;
pub mod numbers;
pub mod pair_page;
pub mod pairing;
pub mod pairing_links;
pub mod profile;
pub mod rabbitmq;
pub mod risk;
pub mod status;
pub mod usage;
pub mod webhooks;

use door::AppState;
use utoipa_axum::router::OpenApiRouter;

/// Every `/v1` route with its OpenAPI description (paths only: the server adds the base
/// document).
pub fn all() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(me::router())
        .merge(cluster::router())
        .merge(instances::router())
        .merge(accounts::router())
        .merge(account_webhooks::router())
        .merge(bulk::router())
        .merge(pairing::router())
        .merge(messages::router())
        .merge(numbers::router())
        .merge(api_keys::router())
        .merge(pairing_links::router())
        .merge(pair_page::router())
        .merge(usage::router())
        .merge(media_retention::router())
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
        .merge(chatwoot::router())
        .merge(rabbitmq::router())
        .merge(risk::router())
        .merge(media::router())
        .merge(health::router())
}
