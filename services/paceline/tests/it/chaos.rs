//! The short chaos run (about a minute of faults): three workers, two API pods and two
//! dispatchers as processes, NATS and Redis restarted, netsim errors and dropped
//! connections, while sends flow with webhooks registered; then no loss, no duplicate,
//! every event delivered and logged once, and no lease epoch claimed twice. The checks
//! are in `harness::chaos`; `loadtest/chaos.sh` runs the same for longer.

use std::time::Duration;

use harness::chaos::{run, Options};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_lose_nothing_duplicate_nothing_and_deliver_every_event() {
    let opts = Options::from_env(Options { seconds: 50, instances: 6, workers: 3, step: Duration::from_secs(3) });
    let report = run(crate::bin(), opts).await;
    println!("{report}");
    // Every kind of fault happened at least once.
    assert_eq!(report.faults.len(), 7, "{:?}", report.faults);
    assert!(report.sent > 0 && report.events > 0 && report.claims > 0, "{report}");
}
