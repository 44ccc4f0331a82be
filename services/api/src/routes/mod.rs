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

#[cfg(test)]
mod tests {
    /// Evolution's action routes are a door of their own: they call the core
    /// (`domain::...`, or the API's `service` for what is not in the core yet), never a
    /// `/v1` route module's handler. Read from the sources, so a new call across doors
    /// fails here.
    #[test]
    fn evolution_routes_call_no_v1_handler() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/routes");
        let mut files = vec![root.join("actions.rs")];
        let mut dirs = vec![root.join("actions")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("the actions folder") {
                let p = e.expect("an entry").path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    files.push(p);
                }
            }
        }
        assert!(files.len() > 5, "found the action routes: {files:?}");
        let v1: Vec<String> = std::fs::read_dir(&root)
            .expect("the routes folder")
            .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_string))
            .filter(|m| !matches!(m.as_str(), "actions" | "access" | "mod"))
            .collect();
        assert!(v1.contains(&"groups".to_string()), "{v1:?}");
        for f in &files {
            let text = std::fs::read_to_string(f).expect("a source file");
            for m in &v1 {
                for needle in [format!("crate::routes::{m}"), format!("routes::{{{m}"), format!("super::super::{m}")] {
                    assert!(!text.contains(&needle), "{} names the /v1 module {m} ({needle})", f.display());
                }
            }
            assert!(!text.contains("crate::routes::{"), "{} imports /v1 route modules", f.display());
        }
    }
}
