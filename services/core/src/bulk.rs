//! The bulk operation's request and answer (`POST /v1/instances/bulk`, the admin's): one
//! action over many instances, each with its own result. The route is the `/v1` door's.

use serde::{Deserialize, Serialize};
use shared::error::ErrorDetail;
use shared::ids::InstanceId;
use utoipa::ToSchema;

/// What to do with each instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// As `POST {inst}/connect`.
    Connect,
    /// As `POST {inst}/restart`.
    Restart,
    /// As `POST {inst}/logout`.
    Logout,
    /// As `DELETE {inst}`.
    Delete,
    /// Adds the tag `value` (no change when the instance has it).
    AddTag,
    /// Removes the tag `value` (no change when the instance lacks it).
    RemoveTag,
}

impl BulkAction {
    /// Whether it takes the tag in `value`.
    pub fn takes_value(self) -> bool {
        matches!(self, BulkAction::AddTag | BulkAction::RemoveTag)
    }
}

/// The action and the instances: `ids`, or every instance with `tag` (then `cursor` and
/// `limit` page through them). Nothing else, and never both.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum BulkIn {
    Ids(BulkByIds),
    Tag(BulkByTag),
}

/// The instances by id.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkByIds {
    pub action: BulkAction,
    /// Instance ids (1 to 500).
    #[schema(min_items = 1, max_items = 500, value_type = Vec<InstanceId>)]
    pub ids: Vec<String>,
    /// The tag `add_tag` adds or `remove_tag` removes (those actions only).
    #[serde(default)]
    #[schema(value_type = Option<crate::schemas::Tag>)]
    pub value: Option<String>,
}

/// Every instance with a tag, 500 per call in id order.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkByTag {
    pub action: BulkAction,
    #[schema(value_type = crate::schemas::Tag)]
    pub tag: String,
    /// `next_cursor` of the previous call.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 1024, pattern = "^[A-Za-z0-9_-]+$")]
    pub cursor: Option<String>,
    /// Most instances this call works on (1 to 500, default 500).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The tag `add_tag` adds or `remove_tag` removes (those actions only).
    #[serde(default)]
    #[schema(value_type = Option<crate::schemas::Tag>)]
    pub value: Option<String>,
}

/// One instance's outcome.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkResult {
    pub id: String,
    pub ok: bool,
    /// Why it failed (the error the instance's own route would have given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BulkOut {
    pub action: BulkAction,
    /// In the order given (ids) or in id order (tag).
    pub results: Vec<BulkResult>,
    pub succeeded: usize,
    pub failed: usize,
    /// With `tag`: more instances have it; call again with this `cursor`. Absent when done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}
