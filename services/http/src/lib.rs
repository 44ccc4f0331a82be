//! What paceline's HTTP doors (`/v1` in `paceline-v1`, Evolution's routes in
//! `paceline-evolution`, MCP over both in `paceline-api`) share, and nothing only one of
//! them needs: the request state ([`AppState`], the core's handles and the pod's own),
//! the extractors that say who calls for which instance ([`extract`]), the one table of
//! who reaches each route ([`access`]), the large-body gate ([`gate`]) and the count of
//! requests per instance ([`usage`]). The doors perform operations by calling the core
//! (`domain`); none calls another door.

pub mod access;
pub mod extract;
pub mod gate;
pub mod state;
pub mod usage;

pub use state::AppState;

/// The body limit of every route but the body-heavy ones (`POST {inst}/messages` and
/// the like, behind [`gate`]).
pub const BODY_LIMIT: usize = 1024 * 1024;
