//! Logs and metrics set-up shared by every role.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::{Config, LogFormat};

/// Installs the global log subscriber (JSON lines by default). Safe to call twice.
pub fn init_logging(config: &Config) {
    let filter = EnvFilter::try_new(&config.log.level).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(|| QuietStderr);
    let _ = match config.log.format {
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}

/// stderr that swallows write errors. When the terminal or pipe behind stderr is gone,
/// tracing-subscriber would report a failed write with `eprintln!`, which panics, and a
/// panic in a signal handler or worker loop must not be what a closed terminal causes.
struct QuietStderr;

impl std::io::Write for QuietStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// The process-wide Prometheus recorder, installed on first use.
pub fn prometheus() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .set_buckets(&[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0])
            .expect("static buckets")
            // Counts rather than seconds: how many items a batch carried.
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Suffix("_batch_size".into()),
                &[1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 256.0],
            )
            .expect("static buckets")
            .install_recorder()
            .expect("the Prometheus recorder is installed once");
        let upkeep = handle.clone();
        // The exporter needs periodic upkeep to drain histogram buffers.
        std::thread::Builder::new()
            .name("metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(std::time::Duration::from_secs(5));
                upkeep.run_upkeep();
            })
            .expect("spawn metrics upkeep");
        handle
    })
}
