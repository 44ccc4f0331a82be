//! The S3-compatible server the media tests run against: moto in server mode, started by
//! `scripts/test` (`PACELINE_TEST_S3_URL`), with a bucket per test, reached through a
//! [`Gate`] the test can close (the store unreachable: connections refused and cut) and
//! open again, with what the bucket held kept.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use shared::config::section::MediaBackend;
use shared::Config;

/// Which backend a media test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    S3,
}

/// A bucket of the test's own on the test S3 server, behind a gate.
pub struct Bucket {
    pub name: String,
    /// The server itself (for the test's own looks at the bucket).
    pub server: String,
    pub gate: Gate,
}

impl Bucket {
    /// A new, empty bucket.
    pub async fn new() -> Bucket {
        let server = std::env::var("PACELINE_TEST_S3_URL")
            .expect("PACELINE_TEST_S3_URL is not set: run the tests through scripts/test");
        let name = format!("pl-{}", uuid::Uuid::new_v4().simple());
        let res = shared::fetch::client_builder()
            .build()
            .unwrap()
            .put(format!("{server}/{name}"))
            .send()
            .await
            .expect("the S3 server answers");
        assert!(res.status().is_success(), "creating bucket {name}: {}", res.status());
        let upstream: SocketAddr = server.trim_start_matches("http://").parse().expect("an address");
        Bucket { name, server, gate: Gate::start(upstream).await }
    }

    /// The endpoint the gateway uses: through the gate.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.gate.addr)
    }

    /// Sets `config` to store new media in this bucket (path-style, as MinIO and moto
    /// want).
    pub fn configure(&self, c: &mut Config) {
        let s = &mut c.media_store;
        s.backend = MediaBackend::S3;
        s.bucket = Some(self.name.clone());
        s.endpoint = Some(self.endpoint());
        s.path_style = true;
        s.prefix = "tenants/".into();
        s.timeout = std::time::Duration::from_secs(2);
    }

    /// The keys in the bucket (straight from the server, past the gate).
    pub async fn keys(&self) -> Vec<String> {
        let url = format!("{}/{}?list-type=2", self.server, self.name);
        let xml = reqwest::get(url).await.unwrap().text().await.unwrap();
        xml.split("<Key>").skip(1).filter_map(|s| s.split("</Key>").next()).map(str::to_string).collect()
    }

    /// An object's `ETag` and length (straight from the server, signed as the gateway's
    /// requests are).
    pub async fn head(&self, key: &str) -> Option<(String, u64)> {
        let mut c = Config::default();
        self.configure(&mut c);
        c.media_store.endpoint = Some(self.server.clone());
        let objects = shared::db::media::Objects::new(&c.media_store).expect("the test bucket's settings");
        match objects.head(key).await {
            Ok((etag, size)) => Some((etag.unwrap_or_default().trim_matches('"').to_string(), size)),
            Err(e) if e.is_not_found() => None,
            Err(e) => panic!("reading {key}'s head: {e}"),
        }
    }
}

/// A TCP relay to the S3 server that can be closed (new connections refused, open ones
/// cut) and opened again on the same address.
pub struct Gate {
    pub addr: SocketAddr,
    open: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Gate {
    async fn start(upstream: SocketAddr) -> Gate {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let open = Arc::new(AtomicBool::new(true));
        let conns: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (o, c) = (open.clone(), conns.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else { continue };
                if !o.load(Ordering::SeqCst) {
                    // Closed: the connection is dropped at once, as a refused one is.
                    drop(client);
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                c.lock().unwrap().push(task.abort_handle());
            }
        });
        Gate { addr, open, conns, accept }
    }

    /// The store unreachable: new connections are dropped and open ones cut.
    pub fn close(&self) {
        self.open.store(false, Ordering::SeqCst);
        for c in self.conns.lock().unwrap().drain(..) {
            c.abort();
        }
    }

    /// The store back.
    pub fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.accept.abort();
        self.close();
    }
}
