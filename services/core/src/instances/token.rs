//! Instance tokens after their creation: sealed so the admin and the instance's account
//! can be shown them again (Evolution's `fetchInstances` shows each instance's token, and
//! Evolution Manager sends it on every instance screen), and rotated. Only the hash
//! authenticates; the sealed copy is AES-256-GCM under the deployment's secrets key
//! (`secrets_key`, else one derived from the admin token), bound to the instance's id.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use shared::db::instances;
use shared::ids::InstanceId;
use shared::sealed::Sealer;
use utoipa::ToSchema;

use crate::{Core, Error, Result};

/// Whose a sealed token is: the instance's, under a label of its own (an attendant's
/// secrets are bound to the bare id, so neither opens as the other).
fn owner(id: &InstanceId) -> String {
    format!("instance-token:{id}")
}

/// `token` sealed for instance `id`, when the deployment can seal.
pub fn seal(core: &Core, id: &InstanceId, token: &str) -> Option<Vec<u8>> {
    Sealer::from_config(&core.config).map(|s| s.seal(&owner(id), token.as_bytes()))
}

/// The tokens of `ids` that can be shown again: sealed, and opened by this deployment's
/// key (one sealed under an earlier key, or made before tokens were sealed, is left out).
pub async fn shown(core: &Core, ids: &[InstanceId]) -> Result<HashMap<InstanceId, String>> {
    let Some(sealer) = Sealer::from_config(&core.config) else { return Ok(HashMap::new()) };
    let sealed = instances::sealed_tokens(&core.db, ids).await?;
    Ok(sealed
        .into_iter()
        .filter_map(|(id, s)| {
            let plain = String::from_utf8(sealer.open(&owner(&id), &s)?).ok()?;
            Some((id, plain))
        })
        .collect())
}

/// Answer of `POST /v1/instances/{id}/token`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InstanceTokenOut {
    /// The instance's new `pl_inst_...` token. The old one no longer works.
    pub token: String,
}

/// Gives instance `id` a new token: the old one stops working at once here, and on the
/// other API pods as soon as they are told (open event streams of the old token close).
pub async fn rotate(core: &Core, id: &InstanceId) -> Result<InstanceTokenOut> {
    let token = shared::auth::generate_token(shared::auth::INSTANCE_TOKEN_PREFIX);
    let sealed = seal(core, id, &token);
    if !instances::set_token(&core.db, id, &shared::auth::hash_token(&token), sealed.as_deref()).await? {
        return Err(Error::InstanceNotFound);
    }
    crate::auth::invalidate(core, id).await;
    tracing::info!(instance_id = %id, "instance token rotated");
    Ok(InstanceTokenOut { token })
}
