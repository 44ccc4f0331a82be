//! Headless Chromium driven through ChromeDriver (WebDriver, by fantoccini), for tests of
//! the pages real users open. `scripts/test` installs Debian's chromium and
//! chromium-driver and sets `PACELINE_TEST_CHROMIUM` and `PACELINE_TEST_CHROMEDRIVER`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub use fantoccini::Locator;
use fantoccini::{Client, ClientBuilder};
use serde_json::json;

use crate::cluster::wait_for;

/// A ChromeDriver process and a browser session on it; both end on drop.
pub struct Browser {
    pub client: Client,
    driver: Child,
    profile: PathBuf,
}

fn env_path(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

impl Browser {
    pub async fn start() -> Browser {
        let chromium = env_path("PACELINE_TEST_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = env_path("PACELINE_TEST_CHROMEDRIVER", "/usr/bin/chromedriver");
        assert!(
            std::path::Path::new(&chromedriver).exists() && std::path::Path::new(&chromium).exists(),
            "{chromedriver} or {chromium} is missing: run the tests through scripts/test, which installs them"
        );
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let up = wait_for(Duration::from_secs(20), || async {
            reqwest::get(format!("{base}/status")).await.ok().filter(|r| r.status().is_success()).map(|_| ())
        })
        .await;
        assert!(up.is_some(), "chromedriver did not start");
        let profile = std::env::temp_dir().join(format!("pl-chromium-{}", uuid::Uuid::new_v4().simple()));
        // Headless, as root, with nothing that reaches out to the internet.
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=420,900",
        ]
        .iter()
        .map(|a| a.to_string())
        .chain([format!("--user-data-dir={}", profile.display())])
        .collect::<Vec<_>>();
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), json!({ "binary": chromium, "args": args }));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector).capabilities(caps).connect(&base).await.expect("a browser session");
        Browser { client, driver, profile }
    }

    /// Waits until `css` matches an element (and `ok` holds for it), within `within`.
    pub async fn wait_for_element(&self, css: &str, within: Duration) -> Option<fantoccini::elements::Element> {
        wait_for(within, || async { self.client.find(Locator::Css(css)).await.ok() }).await
    }

    /// Ends the browser session (Chromium with it), then the driver.
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }

    /// axe-core (npm, installed by `scripts/test`) run in the current page: its
    /// violations of impact `serious` or `critical`, each with the rule, its help and
    /// the elements it found.
    pub async fn serious_accessibility_violations(&self) -> Vec<serde_json::Value> {
        let (_, modules) = crate::test_node();
        let axe = std::fs::read_to_string(modules.join("axe-core/axe.min.js"))
            .expect("axe-core is installed: run the tests through scripts/test");
        self.client.execute(&axe, vec![]).await.expect("axe-core loads in the page");
        let run = "const done = arguments[arguments.length - 1];
            axe.run(document, { resultTypes: ['violations'] })
              .then(r => done(r.violations
                .filter(v => v.impact === 'serious' || v.impact === 'critical')
                .map(v => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target) }))))
              .catch(e => done([{ id: 'axe-error', help: String(e) }]));";
        let found = self.client.execute_async(run, vec![]).await.expect("axe-core runs");
        found.as_array().cloned().unwrap_or_default()
    }

    /// Saves a screenshot under the test artifacts directory; returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let dir = artifacts_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

/// Where tests leave artifacts (screenshots): `PACELINE_TEST_ARTIFACTS`, else
/// `test-artifacts` under the cargo target directory.
pub fn artifacts_dir() -> PathBuf {
    if let Ok(d) = std::env::var("PACELINE_TEST_ARTIFACTS") {
        return PathBuf::from(d);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("target"));
    target.join("test-artifacts")
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
