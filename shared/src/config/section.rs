//! The configuration's sections: one struct per role or concern, each a TOML table
//! (`[pacing]`) and an environment prefix (`PACELINE_PACING__JITTER`). A field's doc
//! comment is its documentation: `docs/configuration.md`'s table is generated from them.

use std::net::SocketAddr;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::{de, LogFormat};

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One section: the struct (every field optional in a file, its default beside it) and
/// its `Default`. Durations keep their unit in their key (`lease_ttl_ms`): milliseconds,
/// or a humantime string (`"30s"`) in a file or the environment.
macro_rules! section {
    ($(#[$m:meta])* $name:ident { $( $(#[$fm:meta])* $field:ident : $ty:ty = $default:expr ),* $(,)? }) => {
        $(#[$m])*
        #[serde_with::serde_as]
        #[derive(Debug, Clone, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(default)]
        pub struct $name {
            $( $(#[$fm])* pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }
    };
}

section! {
    /// What separates deployments (or tests) that share Postgres, Redis and NATS.
    Namespace {
        /// Postgres schema (search_path); tests give each test its own.
        database_schema: Option<String> = None,
        /// Prefix of every Redis key.
        key_prefix: String = "pl".into(),
        /// Prefix of every NATS subject.
        subject_prefix: String = "pl".into(),
    }
}

section! {
    /// The Postgres pool.
    Database {
        /// Connections per process in the pool.
        max_connections: u32 = 20,
    }
}

section! {
    /// The API role: client addresses, shutdown and waits on workers.
    Api {
        /// Peers whose client-address header is believed (CIDRs, comma-separated in the
        /// environment).
        #[serde(deserialize_with = "de::list")]
        #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
        trusted_proxies: Vec<IpNet> = Vec::new(),
        /// The header a trusted proxy puts the client address in.
        client_ip_header: String = "x-forwarded-for".into(),
        /// After SIGTERM: how long the listener stays open answering 503 `shutting_down`
        /// (so load balancers see `/readyz` fail and move traffic) before it closes.
        #[serde(rename = "drain_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        drain: Duration = ms(5_000),
        /// After the drain: how long in-flight requests get to finish.
        #[serde(rename = "shutdown_timeout_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        shutdown_timeout: Duration = ms(25_000),
        /// How long the API waits for a worker's answer before 504 `worker_timeout`.
        #[serde(rename = "rpc_timeout_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        rpc_timeout: Duration = ms(10_000),
        /// How long `GET /instance/connect/{name}` waits for a first QR code.
        #[serde(rename = "connect_qr_wait_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        connect_qr_wait: Duration = ms(5_000),
        /// Web origins (`https://manager.example.com`, comma-separated in the environment)
        /// whose pages may call the API from a browser (CORS), e.g. Evolution Manager
        /// served from its own address; `*` for any. Empty (the default): none, and
        /// browsers refuse cross-origin calls. Credentials (cookies) are never allowed:
        /// callers send their token in a header.
        #[serde(deserialize_with = "de::list")]
        cors_allowed_origins: Vec<String> = Vec::new(),
    }
}

section! {
    /// Logs.
    Log {
        /// `json` (one object per line) or `pretty` (for terminals).
        #[cfg_attr(feature = "openapi", schema(inline))]
        format: LogFormat = LogFormat::Json,
        /// A tracing filter, e.g. `info` or `info,paceline_api=debug`.
        level: String = "info".into(),
    }
}

section! {
    /// The simulator and the sim driver's way to it.
    Netsim {
        /// Where workers reach netsim.
        #[cfg_attr(feature = "openapi", schema(value_type = String))]
        url: url::Url = url::Url::parse("http://127.0.0.1:8790").expect("static url"),
        /// Where netsim listens (its socket protocol and control API).
        #[cfg_attr(feature = "openapi", schema(value_type = String))]
        listen_addr: SocketAddr = ([127, 0, 0, 1], 8790).into(),
        /// How often a shown QR code is replaced (the network's 20 s).
        #[serde(rename = "qr_rotate_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        qr_rotate: Duration = ms(20_000),
        /// The sim driver: how long a request to netsim may take before `worker_timeout`.
        #[serde(rename = "request_timeout_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        request_timeout: Duration = ms(30_000),
    }
}

section! {
    /// Pacing: new instances' rates and how a session warms up after each (re)connect.
    Pacing {
        /// Interval given to new instances that do not set `min_interval_ms` (1000-60000).
        default_min_interval_ms: u32 = 2_000,
        /// Per-minute cap given to new instances that do not set `max_per_minute` (1-60).
        default_max_per_minute: u32 = 20,
        /// The post-connection grace is drawn from [min, max] after each (re)connect.
        #[serde(rename = "grace_min_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        grace_min: Duration = ms(15_000),
        /// The upper end of the post-connection grace.
        #[serde(rename = "grace_max_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        grace_max: Duration = ms(30_000),
        /// Each interval is lengthened by a random 0..jitter fraction of itself (0-1).
        jitter: f64 = 0.25,
        /// After the grace, the rate rises linearly from `ramp_start` of the full rate to
        /// all of it over this long.
        #[serde(rename = "ramp_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        ramp: Duration = ms(600_000),
        /// The fraction of the full rate the ramp starts at, in (0, 1].
        ramp_start: f64 = 0.25,
    }
}

section! {
    /// Ban risk (docs/ban-risk.md): the deployment's policy, which an instance's
    /// `risk_policy` overrides.
    Risk {
        /// The score (0-100) from which an instance's level is elevated.
        elevated: f64 = 25.0,
        /// The score (0-100) from which an instance's level is high.
        high: f64 = 50.0,
        /// The score (0-100) from which an instance's level is critical.
        critical: f64 = 75.0,
        /// Adaptive pacing: at `elevated` the interval is multiplied and the per-minute cap
        /// divided by this, at `high` and `critical` by its square; 1 turns it off (1-10).
        slowdown: f64 = 2.0,
        /// Pause an instance's queue when its risk is critical or the network paused it.
        #[serde(deserialize_with = "de::flexible_bool")]
        auto_pause: bool = true,
        /// At a high risk (or above), hold sends to chats that never wrote to the account;
        /// replies still go.
        #[serde(deserialize_with = "de::flexible_bool")]
        hold_first_contacts: bool = true,
        /// How often each paired instance's risk is evaluated (dispatchers share the work).
        #[serde(rename = "interval_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        interval: Duration = ms(60_000),
    }
}

section! {
    /// The worker role: leases, placement and the send queue's retries.
    Worker {
        /// Time-to-live of an instance lease; a dead worker's instances move within it
        /// (chosen from `loadtest/failover.sh`: sessions open again about 1.5 s after it).
        #[serde(rename = "lease_ttl_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        lease_ttl: Duration = ms(6_000),
        /// How often a worker looks for instances that should run and nobody holds.
        #[serde(rename = "scan_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        scan: Duration = ms(1_000),
        /// Most instances one worker runs.
        max_instances: usize = 5_000,
        /// Most sessions one worker opens per second, connects and reconnects alike, each
        /// at a random point of its slot: after a restart or a network outage sessions
        /// come back at this steady rate instead of all at once (10,000 in 40 s).
        connects_per_second: u32 = 250,
        /// The first wait after a transient send failure; it doubles per attempt (cap 30 s).
        #[serde(rename = "queue_retry_base_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        queue_retry_base: Duration = ms(500),
    }
}

section! {
    /// Stored media: quota, retention and received media's downloads.
    Media {
        /// Bytes of media (sent and received) each instance may store; past it, sends with
        /// media get 413 `quota_exceeded` and received media is logged unavailable.
        quota_bytes: u64 = 2 * 1024 * 1024 * 1024,
        /// Days media is kept; older media gives its bytes back (and its quota) and
        /// answers 410 `media_unavailable`. At least 8, so a queued message's media
        /// outlives it.
        retention_days: u32 = 30,
        /// Days received media is kept (unset: `retention_days`); an instance or its
        /// account may say otherwise (`/v1/.../media/retention`). At least 1.
        inbound_retention_days: Option<u32> = None,
        /// Days sent media is kept (unset: `retention_days`); an instance or its account
        /// may say otherwise. At least 8.
        outbound_retention_days: Option<u32> = None,
        /// The first wait before a failed download of received media is tried again; it
        /// doubles per attempt (cap 1 h), and after 8 tries the media is unavailable.
        #[serde(rename = "retry_base_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        retry_base: Duration = ms(30_000),
    }
}

/// Where media bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum MediaBackend {
    /// In Postgres, beside the rows (1 MiB chunks): nothing else to run.
    #[default]
    Postgres,
    /// In an S3-compatible bucket (AWS S3, MinIO, Cloudflare R2, Ceph RGW).
    S3,
}

section! {
    /// Where new media bytes are stored. Credentials for S3 come from the standard AWS
    /// environment (`AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, or a web identity
    /// token as on EKS, or the instance's metadata service): none are set here.
    MediaStore {
        /// `postgres` (the default) or `s3`. Media already stored stays where it is and
        /// stays readable: `paceline media migrate --to s3` moves it.
        #[cfg_attr(feature = "openapi", schema(inline))]
        backend: MediaBackend = MediaBackend::Postgres,
        /// The bucket (required with `s3`, and while any media is in it).
        bucket: Option<String> = None,
        /// Prefix of every object's key (`<prefix>media/<instance>/<media>`; keys carry
        /// ids, never phone numbers).
        prefix: String = String::new(),
        /// The S3 endpoint, for anything but AWS (`https://minio.example:9000`); an
        /// `http://` endpoint is allowed as given.
        endpoint: Option<String> = None,
        /// The bucket's region (any value for most S3-compatible servers).
        region: String = "us-east-1".into(),
        /// Address the bucket in the path (`endpoint/bucket/key`), as MinIO and Ceph
        /// usually want, instead of as a host name (`bucket.endpoint/key`).
        #[serde(deserialize_with = "de::flexible_bool")]
        path_style: bool = false,
        /// When above zero, `GET /media/{id}` answers a redirect to a presigned URL of
        /// the object valid this long, instead of streaming it through the API.
        #[serde(rename = "presigned_ttl_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        presigned_ttl: Duration = ms(0),
        /// How long one request to the store may take before it fails (and is retried).
        #[serde(rename = "timeout_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        timeout: Duration = ms(30_000),
    }
}

section! {
    /// Request bodies over 1 MB to `POST messages`: cluster-wide slots.
    LargeBody {
        /// Cluster-wide slots for such bodies.
        slots: u32 = 3,
        /// A slot's lease; its holder renews it, a crashed pod's slot frees itself after it.
        #[serde(rename = "slot_ttl_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        slot_ttl: Duration = ms(30_000),
        /// How long a large request waits for a slot before 503 `rate_limited`.
        #[serde(rename = "wait_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        wait: Duration = ms(60_000),
        /// How long a request holding a slot may take to send its body (then 408
        /// `request_timeout`): a slow upload cannot keep a slot for long.
        #[serde(rename = "read_timeout_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        read_timeout: Duration = ms(120_000),
    }
}

section! {
    /// Per-instance caps on group actions (sliding windows, cluster-wide); past them 429.
    Groups {
        /// Groups an instance may create in any 24 hours.
        creates_per_day: u32 = 10,
        /// Members an instance may add, remove, promote or demote in any minute (counted
        /// per member).
        participant_changes_per_minute: u32 = 50,
        /// Groups an instance may join by invite link in any 24 hours.
        joins_per_day: u32 = 20,
    }
}

section! {
    /// Event streams: SSE connections and the JetStream stream behind them.
    Events {
        /// Event streams (SSE) open at once per instance, across the cluster; past it 429.
        streams_per_instance: u32 = 5,
        /// Event streams open at once on one API pod; past it 429.
        streams_per_pod: u32 = 1_000,
        /// The most the JetStream events stream keeps (oldest events go first past it).
        /// NATS reserves it on the server's JetStream storage when the stream is created.
        stream_max_bytes: u64 = 2 * 1024 * 1024 * 1024,
    }
}

section! {
    /// What `/metrics` exports beyond the defaults.
    Metrics {
        /// Also export queue depth and age per instance (one series per instance: opt in
        /// only where the instance count keeps Prometheus comfortable).
        #[serde(deserialize_with = "de::flexible_bool")]
        per_instance: bool = false,
    }
}

section! {
    /// Webhook deliveries (the dispatcher role).
    Webhooks {
        /// One attempt's timeout (connect, send, answer).
        #[serde(rename = "timeout_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        timeout: Duration = ms(10_000),
        /// The wait after the first failed attempt; it doubles per attempt (with jitter) up
        /// to `retry_max_ms`. A `Retry-After` answer is honoured up to that cap.
        #[serde(rename = "retry_base_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        retry_base: Duration = ms(5_000),
        /// The longest wait between two attempts.
        #[serde(rename = "retry_max_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        retry_max: Duration = ms(3_600_000),
        /// How long a delivery is retried before it is `failed` (3 days).
        #[serde(rename = "retry_span_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        retry_span: Duration = ms(3 * 24 * 3_600_000),
        /// An endpoint is disabled once it has failed this many attempts in a row over at
        /// least `disable_after_ms`.
        disable_after_failures: u32 = 50,
        /// The span those failures must cover (5 days).
        #[serde(rename = "disable_after_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        disable_after: Duration = ms(5 * 24 * 3_600_000),
        /// Attempts in flight at once per endpoint URL (endpoints never wait on each other).
        endpoint_concurrency: usize = 8,
        /// Bytes of bodies built with media (Evolution's `webhook_base64`) one dispatcher
        /// pod holds in attempts at once, at most half of them for one instance; past it an
        /// attempt waits for room, then goes back to be retried later. A body larger than
        /// half never carries its media's bytes (64 MiB).
        body_bytes_in_flight: u64 = 64 * 1024 * 1024,
    }
}

section! {
    /// The Chatwoot bridge (the `chatwoot` role).
    Chatwoot {
        /// The wait after a job's first failed try (Chatwoot down, slow or refusing for
        /// now); it doubles per try (less up to a fifth) up to `retry_max_ms`.
        #[serde(rename = "retry_base_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        retry_base: Duration = ms(2_000),
        /// The longest wait between two tries.
        #[serde(rename = "retry_max_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        retry_max: Duration = ms(600_000),
        /// How long a job keeps being tried before it is given up (3 days); an instance's
        /// later jobs wait behind it until then, so its messages reach Chatwoot in order.
        #[serde(rename = "retry_span_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        retry_span: Duration = ms(3 * 24 * 3_600_000),
        /// Jobs one pod does at once (each of another instance).
        concurrency: u32 = 16,
        /// How long a pod holds a job it took (a job is cut off at three quarters of it): a
        /// pod that dies leaves its jobs to the others after this. At least 4 s; keep its
        /// three quarters above a file's upload to Chatwoot (up to 300 s).
        #[serde(rename = "lock_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        lock: Duration = ms(420_000),
    }
}

section! {
    /// Event sinks into RabbitMQ (delivered by the dispatcher role).
    Rabbitmq {
        /// The deployment's broker (`amqp://user:password@host:5672/vhost`, or `amqps://`):
        /// the sinks set without an address of their own (Evolution's `rabbitmq/set`) publish
        /// there. A secret: give it in the environment. Unset: such sinks are refused.
        url: Option<String> = None,
        /// The topic exchange our-format sinks publish to when they name none.
        exchange: String = "paceline.events".into(),
        /// The longest wait between two tries while a broker is down or refusing (the first
        /// wait is 1 s, doubling).
        #[serde(rename = "retry_max_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        retry_max: Duration = ms(60_000),
        /// How long a dispatcher pod holds a sink it delivers (renewed every third of it
        /// while it runs): a pod that dies leaves its sinks to the others after this.
        #[serde(rename = "lock_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        lock: Duration = ms(30_000),
    }
}

section! {
    /// Usage counting.
    Usage {
        /// How often a dispatcher rolls finished deliveries up into the daily usage counts
        /// (events are counted as the relay publishes them).
        #[serde(rename = "rollup_interval_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        rollup_interval: Duration = ms(10_000),
    }
}

section! {
    /// The whatsapp driver.
    Whatsapp {
        /// The WebSocket address (unset: WhatsApp Web's servers).
        ws_url: Option<String> = None,
        /// How long opening a session waits for the socket before retrying.
        #[serde(rename = "connect_timeout_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        connect_timeout: Duration = ms(20_000),
    }
}

section! {
    /// The console role: the web UI, a client of `/v1` with the signed-in user's token.
    Console {
        /// Where the console listens.
        #[cfg_attr(feature = "openapi", schema(value_type = String))]
        listen_addr: SocketAddr = ([127, 0, 0, 1], 8789).into(),
        /// The API the console calls (from the console's pod: a Service's address).
        #[cfg_attr(feature = "openapi", schema(value_type = String))]
        api_url: url::Url = url::Url::parse("http://127.0.0.1:8787").expect("static url"),
        /// A session unused this long is signed out.
        #[serde(rename = "idle_timeout_ms")]
        #[serde_as(as = "de::Millis")]
        #[cfg_attr(feature = "openapi", schema(value_type = u64))]
        idle_timeout: Duration = ms(30 * 60_000),
        /// Mark the console's cookies `Secure` (named `__Host-...`) even when it listens on
        /// loopback (behind a local TLS proxy); on any other address they always are.
        #[serde(deserialize_with = "de::flexible_bool")]
        secure_cookie: bool = false,
    }
}
