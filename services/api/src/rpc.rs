//! Reaching the worker that runs an instance, for the routes not yet in the core:
//! `domain::net` with the answer's error as the `/v1` envelope's.

use shared::bus::{self, RpcRequest};
use shared::ids::InstanceId;
use shared::ApiError;

use crate::state::AppState;

/// Carries a session operation (`NetOp`) to the instance's worker; its answer as `T`.
pub async fn net<T: serde::de::DeserializeOwned>(
    state: &AppState,
    id: &InstanceId,
    op: bus::NetOp,
) -> Result<T, ApiError> {
    Ok(domain::net::net(&state.core, id, op).await?)
}

/// Sends `req` to the instance's worker and returns its answer's value.
pub async fn call(state: &AppState, id: &InstanceId, req: RpcRequest) -> Result<serde_json::Value, ApiError> {
    Ok(domain::net::call(&state.core, id, req).await?)
}

/// The error for an instance no worker runs, from its recorded state.
pub async fn not_running(state: &AppState, id: &InstanceId) -> Result<ApiError, ApiError> {
    Ok(domain::net::not_running(&state.core, id).await?.into())
}
