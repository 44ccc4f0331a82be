//! An instance's Chatwoot inbox (issue #37): the settings of `{inst}/chatwoot` (and of
//! Evolution's `chatwoot/set`), stored with the access token sealed, and the webhook
//! Chatwoot posts its agents' messages to. The bridge itself (contacts, conversations,
//! messages both ways) is the `paceline-chatwoot` crate, in the `chatwoot` role; the API
//! only stores settings and queues what Chatwoot tells it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::db::chatwoot::{self as rows, InboxRow};
use shared::ids::InstanceId;
use shared::jid::Jid;
use shared::sealed::Sealer;
use utoipa::ToSchema;

use crate::attendant::{check_secret, check_url, merge, origin_of};
use crate::{Core, Error, Result};

pub mod account;
pub mod hook;

const IGNORE_LIMIT: usize = 1000;
const NAME_LIMIT: usize = 100;

fn yes() -> bool {
    true
}
fn d_delimiter() -> String {
    "\n".into()
}
fn d_import_days() -> u32 {
    7
}

/// Body of `PUT {inst}/chatwoot`: the whole inbox.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatwootIn {
    /// Default true. While false nothing goes to Chatwoot, and its webhooks are ignored.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Chatwoot's address, e.g. `https://chatwoot.example.com`.
    #[schema(min_length = 1, max_length = 2048, pattern = "^https?://")]
    pub url: String,
    /// The Chatwoot account the inbox is in.
    #[schema(minimum = 1)]
    pub account_id: i64,
    /// Write-only: an access token of a Chatwoot user (or agent bot) of that account, sent
    /// as `api_access_token`. Required unless one is stored for the same address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 512)]
    pub token: Option<String>,
    /// An API-channel inbox to use; absent, the bridge creates one named `inbox_name` with
    /// its webhook set to `webhook_url`.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub inbox_id: Option<i64>,
    /// The name of the inbox the bridge creates (default: the instance's name).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 100)]
    pub inbox_name: Option<String>,
    /// An agent's name goes before their message on WhatsApp, in bold (default true).
    #[serde(default = "yes")]
    pub sign_messages: bool,
    /// Between the name and the message (default a line break).
    #[serde(default = "d_delimiter")]
    #[schema(max_length = 20)]
    pub sign_delimiter: String,
    /// A message in a chat whose conversation was resolved goes to that conversation,
    /// reopening it (default true); false opens a new one.
    #[serde(default = "yes")]
    pub reopen_conversation: bool,
    /// New conversations start `pending` instead of `open` (default false).
    #[serde(default)]
    pub conversation_pending: bool,
    /// Group chats go to Chatwoot too, each message naming its sender (default true).
    #[serde(default = "yes")]
    pub groups: bool,
    /// Chats (JIDs or numbers) kept out of Chatwoot.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub ignore_jids: Vec<String>,
    /// Every chat of the local log becomes a contact in the inbox, once (on the first
    /// PUT asking for it; its progress shows as `pending_jobs`).
    #[serde(default)]
    pub import_contacts: bool,
    /// The local log's messages of the last `import_days` days (at most 10,000, the
    /// newest) go into their conversations, oldest first, once; live messages are never
    /// doubled by it.
    #[serde(default)]
    pub import_messages: bool,
    /// Days of messages `import_messages` brings (default 7).
    #[serde(default = "d_import_days")]
    #[schema(minimum = 1, maximum = 90)]
    pub import_days: u32,
    /// Chatwoot may be on a private or loopback address (a Chatwoot in the cluster). Only
    /// the admin may set it, and it holds for the address it was set for.
    #[serde(default)]
    pub allow_private_targets: bool,
}

/// An instance's inbox as shown: the token never, only that it is set.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChatwootOut {
    pub enabled: bool,
    pub url: String,
    pub account_id: i64,
    pub token_set: bool,
    /// The inbox in Chatwoot; null until the bridge has created it.
    pub inbox_id: Option<i64>,
    pub inbox_name: Option<String>,
    pub sign_messages: bool,
    pub sign_delimiter: String,
    pub reopen_conversation: bool,
    pub conversation_pending: bool,
    pub groups: bool,
    pub ignore_jids: Vec<String>,
    pub import_contacts: bool,
    pub import_messages: bool,
    pub import_days: u32,
    pub allow_private_targets: bool,
    /// What the inbox's webhook must be (set by the bridge on an inbox it creates); a
    /// secret: whoever holds it can make the instance send.
    pub webhook_url: String,
    /// The bridge's last failure talking to Chatwoot (cleared by a success).
    pub last_error: Option<String>,
    /// The account whose Chatwoot settings this inbox was made from (none: the
    /// instance's own).
    pub from_account: Option<String>,
    /// Work waiting for Chatwoot (messages both ways), and work given up on.
    pub pending_jobs: i64,
    pub failed_jobs: i64,
    pub updated_at: DateTime<Utc>,
}

impl ChatwootIn {
    /// Checks what a schema cannot say and normalizes (ignored chats as JIDs).
    pub fn validate(mut self) -> Result<ChatwootIn> {
        let u = check_url("url", &self.url)?;
        self.url = u.as_str().trim_end_matches('/').to_string();
        if self.account_id < 1 {
            return Err(Error::field("account_id", "account_id must be at least 1"));
        }
        if self.inbox_id.is_some_and(|i| i < 1) {
            return Err(Error::field("inbox_id", "inbox_id must be at least 1"));
        }
        check_secret("token", &self.token)?;
        if let Some(n) = &mut self.inbox_name {
            let t = crate::text::trim_ecma(n).to_string();
            if t.is_empty() || t.chars().count() > NAME_LIMIT || t.chars().any(char::is_control) {
                return Err(Error::field("inbox_name", "inbox_name must be 1 to 100 characters"));
            }
            *n = t;
        }
        if !(1..=90).contains(&self.import_days) {
            return Err(Error::field("import_days", "import_days must be 1 to 90"));
        }
        if self.sign_delimiter.chars().count() > 20 {
            return Err(Error::field("sign_delimiter", "sign_delimiter is at most 20 characters"));
        }
        if self.ignore_jids.len() > IGNORE_LIMIT {
            return Err(Error::field("ignore_jids", "ignore_jids holds at most 1000 entries"));
        }
        for j in self.ignore_jids.iter_mut() {
            *j = Jid::parse(j)
                .map_err(|_| Error::field("ignore_jids", "each of ignore_jids must be a JID or a phone number"))?
                .to_string();
        }
        Ok(self)
    }

    /// The origin (scheme, host, port) of `url`.
    pub fn origin(&self) -> Option<String> {
        origin_of(&self.url)
    }
}

/// Whose sealed secrets are whose: the token and the webhook secret each under a label
/// of their own, so neither opens as the other or as an attendant's.
pub(crate) fn token_owner(id: &InstanceId) -> String {
    format!("chatwoot:{id}")
}
fn hook_owner(id: &InstanceId) -> String {
    format!("chatwoot-hook:{id}")
}

/// A stored inbox, read back: the settings, the token and the webhook secret opened.
#[derive(Clone)]
pub struct Stored {
    pub instance_id: InstanceId,
    pub config: ChatwootIn,
    pub token: String,
    pub hook: String,
    pub inbox_id: Option<i64>,
    /// The origin the admin allowed private addresses for.
    pub private_origin: Option<String>,
    pub generation: i64,
    pub last_error: Option<String>,
    /// Made from this account's settings (none: the instance's own).
    pub from_account: Option<String>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for Stored {
    /// Without the token and the webhook secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stored")
            .field("instance_id", &self.instance_id)
            .field("inbox_id", &self.inbox_id)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

pub(crate) fn sealer(config: &shared::Config) -> Result<Sealer> {
    Sealer::from_config(config).ok_or_else(|| Error::internal("no key to seal secrets with"))
}

impl Stored {
    /// Reads a stored row; one this key does not open is an error, never a guess.
    pub fn open(row: InboxRow, sealer: &Sealer) -> Result<Stored> {
        let id = row.instance_id;
        let open = |owner: String, sealed: &[u8]| {
            sealer
                .open(&owner, sealed)
                .and_then(|p| String::from_utf8(p).ok())
                .ok_or_else(|| Error::internal("a stored Chatwoot secret does not open with this key"))
        };
        let token = open(token_owner(&id), &row.token_sealed)?;
        let hook = open(hook_owner(&id), &row.hook_sealed)?;
        let config: ChatwootIn = serde_json::from_value(row.config).map_err(Error::internal)?;
        Ok(Stored {
            instance_id: id,
            config,
            token,
            hook,
            inbox_id: row.inbox_id,
            private_origin: row.private_origin,
            generation: row.generation,
            last_error: row.last_error,
            from_account: row.from_account,
            updated_at: row.updated_at,
        })
    }

    /// Whether Chatwoot may be called on a private address: the admin allowed it for the
    /// origin it has now.
    pub fn allow_private(&self) -> bool {
        self.private_origin.is_some() && self.private_origin == self.config.origin()
    }

    /// Whether a chat goes to Chatwoot: a person's or (when asked) a group's, not ignored;
    /// never statuses, channels or broadcasts.
    pub fn carries(&self, chat: &str) -> bool {
        use shared::jid::{GROUP_SERVER, LID_SERVER, USER_SERVER};
        let server = chat.rsplit_once('@').map(|(_, s)| s).unwrap_or_default();
        let kind_ok = server == USER_SERVER || server == LID_SERVER || (server == GROUP_SERVER && self.config.groups);
        self.config.enabled && kind_ok && !self.config.ignore_jids.iter().any(|j| j == chat)
    }
}

/// The URL Chatwoot posts the inbox's webhooks to.
pub fn webhook_url(config: &shared::Config, hook: &str) -> String {
    format!("{}/v1/chatwoot/webhook/{hook}", config.server_url())
}

/// The instance's inbox, opened.
pub async fn stored(core: &Core, id: &InstanceId) -> Result<Stored> {
    let row = rows::get(&core.db, id).await?.ok_or(Error::NotFound("chatwoot inbox"))?;
    Stored::open(row, &sealer(&core.config)?)
}

/// `GET {inst}/chatwoot`.
pub async fn get(core: &Core, id: &InstanceId) -> Result<ChatwootOut> {
    let s = stored(core, id).await?;
    let (pending_jobs, failed_jobs) = rows::counts(&core.db, id).await?;
    let c = s.config.clone();
    Ok(ChatwootOut {
        enabled: c.enabled,
        url: c.url,
        account_id: c.account_id,
        token_set: true,
        inbox_id: s.inbox_id,
        inbox_name: c.inbox_name,
        sign_messages: c.sign_messages,
        sign_delimiter: c.sign_delimiter,
        reopen_conversation: c.reopen_conversation,
        conversation_pending: c.conversation_pending,
        groups: c.groups,
        ignore_jids: c.ignore_jids,
        import_contacts: c.import_contacts,
        import_messages: c.import_messages,
        import_days: c.import_days,
        allow_private_targets: s.allow_private(),
        webhook_url: webhook_url(&core.config, &s.hook),
        last_error: s.last_error,
        from_account: s.from_account,
        pending_jobs,
        failed_jobs,
        updated_at: s.updated_at,
    })
}

/// Settings that passed a PUT's rules, ready to store.
pub(crate) struct Checked {
    pub c: ChatwootIn,
    pub token: String,
    /// The origin the admin allowed private addresses for, if any.
    pub private_origin: Option<String>,
}

/// What is stored now, for a PUT's rules: the settings, the token (when it may be kept)
/// and the approved origin.
pub(crate) struct Now<'a> {
    pub config: &'a ChatwootIn,
    pub token: Option<&'a str>,
    pub private_origin: Option<&'a str>,
}

/// A PUT's rules, for an instance's settings and an account's: the token may be left out
/// while Chatwoot stays at the same origin and account; only the admin turns
/// `allow_private_targets` on (for Chatwoot's origin then; another caller keeps it only
/// while Chatwoot stays there); a new address must resolve to public addresses unless
/// private ones are allowed.
pub(crate) async fn check(core: &Core, admin: bool, body: ChatwootIn, now: Option<Now<'_>>) -> Result<Checked> {
    let mut c = body.validate()?;
    let origin = c.origin();
    let same_place = now.as_ref().is_some_and(|n| n.config.origin() == origin && n.config.account_id == c.account_id);
    let token = match (c.token.take(), now.as_ref().and_then(|n| n.token)) {
        (Some(t), _) => t,
        (None, Some(t)) if same_place => t.to_string(),
        _ => return Err(Error::field("token", "token is required (Chatwoot's address or account changed)")),
    };
    let approved = now.as_ref().and_then(|n| n.private_origin.map(str::to_string));
    if !admin {
        if c.allow_private_targets && approved.is_none() {
            return Err(Error::forbidden("only the admin may set allow_private_targets"));
        }
        c.allow_private_targets = approved.is_some() && approved == origin;
    }
    let private_origin = if c.allow_private_targets { origin.clone() } else { None };
    // A new address is checked (the bridge's client checks again where it connects); the
    // stored one is not resolved again, so settings can always be turned off or edited.
    let known =
        now.as_ref().is_some_and(|n| n.config.url == c.url && (private_origin.is_some() || n.private_origin.is_none()));
    if !known {
        let url = url::Url::parse(&c.url).map_err(Error::internal)?;
        let allow = private_origin.is_some() || core.config.allow_private_targets;
        shared::fetch::check_url(&url, allow).await.map_err(|e| match e {
            shared::fetch::FetchError::Refused => Error::field(
                "url",
                "Chatwoot's URL must resolve to public addresses (the admin may allow private ones for this instance)",
            ),
            _ => Error::field("url", "Chatwoot's URL does not resolve"),
        })?;
    }
    Ok(Checked { c, token, private_origin })
}

/// Stores an instance's inbox: its own settings, or (`from_account`) made from its
/// account's. `now`: what is stored for it.
pub(crate) async fn store(
    core: &Core,
    id: &InstanceId,
    k: Checked,
    now: Option<&Stored>,
    from_account: Option<&str>,
) -> Result<()> {
    let sealer = sealer(&core.config)?;
    let c = &k.c;
    let same_place = now.is_some_and(|n| n.config.origin() == c.origin() && n.config.account_id == c.account_id);
    let moved = now.is_some_and(|n| {
        !same_place
            || (c.inbox_id.is_some() && c.inbox_id != n.inbox_id)
            || (c.inbox_id.is_none() && n.config.inbox_id.is_some())
    });
    // An inbox the bridge made stays while Chatwoot's account does.
    let inbox_id = c.inbox_id.or(now.filter(|_| !moved).and_then(|n| n.inbox_id));
    let hook = now.map(|n| n.hook.clone()).unwrap_or_else(|| shared::auth::generate_token("cwh_"));
    let config = serde_json::to_value(c).map_err(Error::internal)?;
    let put = rows::Put {
        config: &config,
        token_sealed: &sealer.seal(&token_owner(id), k.token.as_bytes()),
        inbox_id,
        hook: (&shared::auth::hash_token(&hook), &sealer.seal(&hook_owner(id), hook.as_bytes())),
        private_origin: k.private_origin.as_deref(),
        moved,
        import: c.import_contacts || c.import_messages,
        from_account,
    };
    if !rows::put(&core.db, id, put).await? {
        return Err(Error::InstanceNotFound);
    }
    tracing::info!(instance_id = %id, moved, inherited = from_account.is_some(), "chatwoot inbox set");
    Ok(())
}

/// `PUT {inst}/chatwoot`: checks and stores the instance's own inbox (replacing one made
/// from its account's settings; then a token is required).
pub async fn put(core: &Core, id: &InstanceId, admin: bool, body: ChatwootIn) -> Result<ChatwootOut> {
    let sealer = sealer(&core.config)?;
    let now = match rows::get(&core.db, id).await? {
        Some(row) => Some(Stored::open(row, &sealer)?),
        None => None,
    };
    let view = now.as_ref().map(|n| Now {
        config: &n.config,
        // An account's token, or the admin's allowance for the account's Chatwoot, is not
        // the instance's to keep.
        token: n.from_account.is_none().then_some(n.token.as_str()),
        private_origin: n.private_origin.as_deref().filter(|_| n.from_account.is_none()),
    });
    let k = check(core, admin, body, view).await?;
    store(core, id, k, now.as_ref(), None).await?;
    get(core, id).await
}

/// `PATCH {inst}/chatwoot`: a JSON merge patch over the stored settings.
pub async fn patch(core: &Core, id: &InstanceId, admin: bool, patch: &serde_json::Value) -> Result<ChatwootOut> {
    let now = stored(core, id).await?;
    let mut shown = now.config.clone();
    shown.allow_private_targets = now.allow_private();
    let mut v = serde_json::to_value(&shown).map_err(Error::internal)?;
    merge(&mut v, patch);
    let next: ChatwootIn = shared::json::parse_json(&serde_json::to_vec(&v).map_err(Error::internal)?)?;
    put(core, id, admin, next).await
}

/// `DELETE {inst}/chatwoot`: the bridge stops; nothing in Chatwoot is removed.
pub async fn delete(core: &Core, id: &InstanceId) -> Result<()> {
    if !rows::delete(&core.db, id).await? {
        return Err(Error::NotFound("chatwoot inbox"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
