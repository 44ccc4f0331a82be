//! NATS: the connection and every subject name. Only this module formats subjects.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ids::InstanceId;
use crate::{ApiError, Config, ErrorCode};

/// Connects to NATS, naming the connection after the role. A pod starts even while
/// NATS is down: the client keeps connecting in the background (and `/readyz` says
/// unready meanwhile). Normally the connection is up when this returns: it waits up to
/// `INITIAL_CONNECT_WAIT` for it.
pub async fn connect(config: &Config, role: &str) -> Result<async_nats::Client, async_nats::ConnectError> {
    let client = async_nats::ConnectOptions::new()
        .name(format!("paceline-{role}"))
        .retry_on_initial_connect()
        .connection_timeout(Duration::from_secs(5))
        .connect(config.nats_url.as_str())
        .await?;
    let deadline = tokio::time::Instant::now() + INITIAL_CONNECT_WAIT;
    while client.connection_state() != async_nats::connection::State::Connected
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if client.connection_state() != async_nats::connection::State::Connected {
        tracing::warn!(role, "NATS is not reachable yet; starting anyway and connecting in the background");
    }
    Ok(client)
}

/// How long a starting pod waits for its first NATS connection before going on without.
pub const INITIAL_CONNECT_WAIT: Duration = Duration::from_secs(5);

/// Builds subjects under the configured prefix (tests give each test its own).
#[derive(Debug, Clone)]
pub struct Subjects {
    prefix: String,
}

impl Subjects {
    pub fn new(config: &Config) -> Self {
        Subjects { prefix: config.namespace.subject_prefix.clone() }
    }

    /// Liveness announcements of every pod, `<prefix>.pods.<role>`.
    pub fn pods(&self, role: &str) -> String {
        format!("{}.pods.{role}", self.prefix)
    }

    /// Requests to the worker that runs `instance` (only the lease holder subscribes).
    pub fn instance_rpc(&self, instance: &InstanceId) -> String {
        format!("{}.inst.{instance}.rpc", self.prefix)
    }

    /// "The instance's queue has news": its worker looks at the queue head now (with the
    /// payload [`RULES_CHANGED`], it also reads the instance's pacing and pause again).
    pub fn instance_queue(&self, instance: &InstanceId) -> String {
        format!("{}.inst.{instance}.queue", self.prefix)
    }

    /// A message's final status (sent or failed), for `wait=true` requests.
    pub fn message_result(&self, message: &crate::ids::MessageId) -> String {
        format!("{}.msg.{message}.result", self.prefix)
    }

    /// Where an event is published: `<prefix>.events.<instance>.<type>` (types are dotted,
    /// e.g. `message.queued`, so they filter with subject wildcards).
    pub fn event(&self, instance: &str, kind: &str) -> String {
        format!("{}.events.{instance}.{kind}", self.prefix)
    }

    /// Events of one instance (or of all), of one type (or of all): the real-time
    /// stream's filters.
    pub fn events_filter(&self, instance: Option<&str>, kind: Option<&str>) -> String {
        format!("{}.events.{}.{}", self.prefix, instance.unwrap_or("*"), kind.unwrap_or(">"))
    }

    /// Every event subject (the stream's filter).
    pub fn events_all(&self) -> String {
        format!("{}.events.>", self.prefix)
    }

    /// The JetStream stream that keeps events (stream names cannot contain dots).
    pub fn events_stream(&self) -> String {
        format!("{}_EVENTS", self.prefix.replace('-', "_").to_uppercase())
    }

    /// "What this instance's token may do changed" (deleted, renamed, allow-list edited):
    /// API pods drop their cached entries of it.
    pub fn auth_changed(&self) -> String {
        format!("{}.auth.changed", self.prefix)
    }

    /// "An instance wants to run": workers scan at once instead of at their next tick.
    pub fn workers_wake(&self) -> String {
        format!("{}.workers.wake", self.prefix)
    }
}

/// The queue wake-up's payload when the instance's pacing or pause changed.
pub const RULES_CHANGED: &[u8] = b"rules";

/// How long JetStream remembers event ids (repeats within it are dropped).
pub const EVENTS_DEDUP_WINDOW: Duration = Duration::from_secs(120);
/// How long events stay in the stream: what the real-time stream can resume from.
pub const EVENTS_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Why the events stream could not be found or set up.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("nats: {0}")]
    Nats(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("setting up the events stream timed out")]
    Timeout,
}

/// The events stream: file storage (a NATS restart keeps it), kept for
/// [`EVENTS_RETENTION`] and at most `max_bytes` (the oldest events go first past it).
fn events_stream_config(subjects: &Subjects, max_bytes: u64) -> async_nats::jetstream::stream::Config {
    async_nats::jetstream::stream::Config {
        name: subjects.events_stream(),
        subjects: vec![subjects.events_all()],
        duplicate_window: EVENTS_DEDUP_WINDOW,
        max_age: EVENTS_RETENTION,
        max_bytes: i64::try_from(max_bytes).unwrap_or(i64::MAX),
        ..Default::default()
    }
}

/// Finds the events stream, creating it when missing (an existing stream keeps its
/// settings: [`configure_events_stream`] changes them).
pub async fn ensure_events_stream(
    js: &async_nats::jetstream::Context,
    subjects: &Subjects,
    max_bytes: u64,
) -> Result<async_nats::jetstream::stream::Stream, StreamError> {
    js.get_or_create_stream(events_stream_config(subjects, max_bytes)).await.map_err(|e| StreamError::Nats(e.into()))
}

/// Creates the events stream or brings an existing one to these settings (the relay
/// does, at start).
pub async fn configure_events_stream(
    js: &async_nats::jetstream::Context,
    subjects: &Subjects,
    max_bytes: u64,
) -> Result<(), StreamError> {
    js.create_or_update_stream(events_stream_config(subjects, max_bytes))
        .await
        .map(drop)
        .map_err(|e| StreamError::Nats(e.into()))
}

/// A request from an API pod to the worker that runs an instance.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RpcRequest {
    /// A phone pairing code for `phone` (only while `qr_pending`).
    PairingCode { phone: String },
    /// Unlink the device; the instance becomes `logged_out`.
    Logout,
    /// Close and reopen the session.
    Restart,
    /// Which of these numbers (digits) have an account.
    CheckNumbers { numbers: Vec<String> },
    /// An operation on the running session (chats, contacts, block list).
    Net { op: crate::contract::NetOp },
    /// Sets the account's profile picture to stored media (its bytes stay in Postgres,
    /// never on the bus; the worker reads them and runs `contract::SetPicture`), or
    /// removes it (`media_id` null); with `group`, that group's picture
    /// (`contract::SetGroupPicture`). Answers null.
    SetPicture {
        media_id: Option<crate::ids::MediaId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<crate::jid::Jid>,
    },
}

impl RpcRequest {
    /// Its name in metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            RpcRequest::PairingCode { .. } => "pairing_code",
            RpcRequest::Logout => "logout",
            RpcRequest::Restart => "restart",
            RpcRequest::CheckNumbers { .. } => "check_numbers",
            RpcRequest::Net { .. } => "net",
            RpcRequest::SetPicture { .. } => "set_picture",
        }
    }
}

/// The worker's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum RpcReply {
    Ok {
        #[serde(default)]
        value: serde_json::Value,
    },
    Err {
        code: ErrorCode,
        message: String,
        retryable: bool,
    },
}

impl RpcReply {
    pub fn err(code: ErrorCode, message: impl Into<String>) -> RpcReply {
        RpcReply::Err { code, message: message.into(), retryable: code.retryable() }
    }
}

impl From<RpcReply> for Result<serde_json::Value, ApiError> {
    fn from(r: RpcReply) -> Self {
        match r {
            RpcReply::Ok { value } => Ok(value),
            RpcReply::Err { code, message, retryable } => Err(ApiError::new(code, message).with_retryable(retryable)),
        }
    }
}

/// Why a request to a worker got no answer.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("no worker runs this instance")]
    NoResponders,
    #[error("the worker did not answer in time")]
    Timeout,
    #[error("rpc failed: {0}")]
    Other(String),
}

/// Sends `req` to the worker running `instance` and waits up to `timeout`.
pub async fn request(
    client: &async_nats::Client,
    subjects: &Subjects,
    instance: &InstanceId,
    req: &RpcRequest,
    timeout: Duration,
) -> Result<RpcReply, RpcError> {
    use async_nats::RequestErrorKind;
    let payload = serde_json::to_vec(req).expect("rpc requests serialize");
    let request = async_nats::Request::new().payload(payload.into()).timeout(Some(timeout));
    match client.send_request(subjects.instance_rpc(instance), request).await {
        Ok(msg) => serde_json::from_slice(&msg.payload).map_err(|e| RpcError::Other(format!("bad reply: {e}"))),
        Err(e) => Err(match e.kind() {
            RequestErrorKind::NoResponders => RpcError::NoResponders,
            RequestErrorKind::TimedOut => RpcError::Timeout,
            RequestErrorKind::Other => RpcError::Other(e.to_string()),
        }),
    }
}

/// Whether the client is connected right now (used by `/readyz`).
pub async fn is_ready(client: &async_nats::Client) -> bool {
    client.connection_state() == async_nats::connection::State::Connected
        && tokio::time::timeout(Duration::from_secs(2), client.flush()).await.is_ok_and(|r| r.is_ok())
}

/// Flushes pending publishes, giving up after `FLUSH_TIMEOUT` (NATS may be down while
/// we stop; shutting down must not wait for it to come back).
pub async fn flush_bounded(client: &async_nats::Client) {
    if tokio::time::timeout(FLUSH_TIMEOUT, client.flush()).await.is_err() {
        tracing::warn!("nats flush timed out");
    }
}

/// How long a flush may take on shutdown.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens (creating it, for the first pod that asks) the durable pull consumer `config`
/// names on the events stream: how every role that reads events shares its work. Each
/// NATS call is bounded by `deadline`.
pub async fn events_consumer(
    nats: &async_nats::Client,
    subjects: &Subjects,
    config: async_nats::jetstream::consumer::pull::Config,
    deadline: Duration,
) -> Result<async_nats::jetstream::consumer::Consumer<async_nats::jetstream::consumer::pull::Config>, String> {
    let stream = events_stream(nats, subjects, deadline).await?;
    let name = config.durable_name.clone().unwrap_or_default();
    tokio::time::timeout(deadline, stream.get_or_create_consumer(&name, config))
        .await
        .map_err(|_| format!("opening the {name} consumer timed out"))?
        .map_err(|e| format!("opening the {name} consumer: {e}"))
}

/// Removes the durable consumer `name` from the events stream, so the stream no longer
/// filters and keeps events for it; false when there was none.
pub async fn drop_events_consumer(
    nats: &async_nats::Client,
    subjects: &Subjects,
    name: &str,
    deadline: Duration,
) -> Result<bool, String> {
    use async_nats::jetstream::{stream::ConsumerErrorKind, ErrorCode as JsCode};
    let stream = events_stream(nats, subjects, deadline).await?;
    match tokio::time::timeout(deadline, stream.delete_consumer(name)).await {
        Err(_) => Err(format!("removing the {name} consumer timed out")),
        Ok(Ok(_)) => Ok(true),
        Ok(Err(e)) => match e.kind() {
            ConsumerErrorKind::JetStream(j) if j.error_code() == JsCode::CONSUMER_NOT_FOUND => Ok(false),
            _ => Err(format!("removing the {name} consumer: {e}")),
        },
    }
}

async fn events_stream(
    nats: &async_nats::Client,
    subjects: &Subjects,
    deadline: Duration,
) -> Result<async_nats::jetstream::stream::Stream, String> {
    let js = async_nats::jetstream::new(nats.clone());
    tokio::time::timeout(deadline, js.get_stream(subjects.events_stream()))
        .await
        .map_err(|_| "finding the events stream timed out".to_string())?
        .map_err(|e| format!("finding the events stream: {e}"))
}
