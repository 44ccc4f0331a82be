use super::*;
use chrono::NaiveTime;
use rand::rngs::StdRng;
use rand::SeedableRng;

fn rules() -> Rules {
    Rules {
        min_interval: Duration::from_secs(2),
        max_per_minute: 20,
        jitter: 0.0,
        grace_min: Duration::from_secs(15),
        grace_max: Duration::from_secs(30),
        ramp: Duration::ZERO,
        ramp_start: 0.25,
        window: None,
    }
}

fn wall() -> DateTime<Utc> {
    "2026-11-23T12:00:00Z".parse().unwrap()
}

/// Drives the pacer like the queue does: sleep until allowed, send, repeat. Returns the
/// send times relative to the connect.
async fn drive(p: &mut Pacer, n: usize, rng: &mut StdRng) -> Vec<Duration> {
    let start = Instant::now();
    p.connected(start, rng);
    let mut out = Vec::new();
    for _ in 0..n {
        let elapsed = Instant::now() - start;
        let at = p.next_at(Instant::now(), wall() + chrono::Duration::from_std(elapsed).unwrap()).unwrap();
        tokio::time::sleep_until(at).await;
        out.push(Instant::now() - start);
        p.sent(Instant::now(), rng);
    }
    out
}

#[tokio::test(start_paused = true)]
async fn grace_then_interval() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut p = Pacer::new(rules());
    let t = drive(&mut p, 4, &mut rng).await;
    assert!(t[0] >= Duration::from_secs(15) && t[0] <= Duration::from_secs(30), "grace {:?}", t[0]);
    for w in t.windows(2) {
        assert_eq!(w[1] - w[0], Duration::from_secs(2));
    }
}

#[tokio::test(start_paused = true)]
async fn nothing_while_disconnected_and_grace_restarts_on_reconnect() {
    let mut rng = StdRng::seed_from_u64(2);
    let mut p = Pacer::new(Rules { grace_min: Duration::from_secs(20), grace_max: Duration::from_secs(20), ..rules() });
    assert!(p.next_at(Instant::now(), wall()).is_none());
    drive(&mut p, 1, &mut rng).await;
    p.disconnected();
    assert!(p.next_at(Instant::now(), wall()).is_none());
    let now = Instant::now();
    p.connected(now, &mut rng);
    assert_eq!(p.next_at(now, wall()).unwrap() - now, Duration::from_secs(20));
}

#[tokio::test(start_paused = true)]
async fn jitter_only_lengthens_within_its_fraction() {
    let mut rng = StdRng::seed_from_u64(3);
    let mut p = Pacer::new(Rules {
        jitter: 0.5,
        max_per_minute: 60,
        grace_min: Duration::ZERO,
        grace_max: Duration::ZERO,
        ..rules()
    });
    let t = drive(&mut p, 30, &mut rng).await;
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.iter().all(|g| *g >= Duration::from_secs(2) && *g <= Duration::from_secs(3)), "{gaps:?}");
    assert!(gaps.iter().any(|g| *g > Duration::from_millis(2100)), "jitter varies the gaps");
}

#[tokio::test(start_paused = true)]
async fn per_minute_cap_holds_in_every_sliding_minute() {
    let mut rng = StdRng::seed_from_u64(4);
    let r = Rules {
        min_interval: Duration::from_millis(100),
        max_per_minute: 10,
        grace_min: Duration::ZERO,
        grace_max: Duration::ZERO,
        ..rules()
    };
    let mut p = Pacer::new(r);
    let t = drive(&mut p, 35, &mut rng).await;
    for (i, a) in t.iter().enumerate() {
        let in_minute = t[i..].iter().take_while(|b| **b - *a < MINUTE).count();
        assert!(in_minute <= 10, "{in_minute} sends within a minute from {a:?}");
    }
    // The first ten go at the interval, the eleventh waits for the first to age out.
    assert_eq!(t[9], Duration::from_millis(900));
    assert_eq!(t[10], Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn ramp_up_starts_slow_and_reaches_the_full_rate() {
    let mut rng = StdRng::seed_from_u64(5);
    let r = Rules {
        min_interval: Duration::from_secs(1),
        max_per_minute: 60,
        grace_min: Duration::ZERO,
        grace_max: Duration::ZERO,
        ramp: Duration::from_secs(120),
        ramp_start: 0.25,
        ..rules()
    };
    let mut p = Pacer::new(r);
    let t = drive(&mut p, 120, &mut rng).await;
    let first_gap = t[1] - t[0];
    assert_eq!(first_gap, Duration::from_secs(4), "a quarter of the rate: 4x the interval");
    let last_gap = t[119] - t[118];
    assert_eq!(last_gap, Duration::from_secs(1), "full rate after the ramp");
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.windows(2).all(|g| g[1] <= g[0]), "the rate only rises");
}

#[tokio::test(start_paused = true)]
async fn send_window_in_the_instance_time_zone() {
    let mut rng = StdRng::seed_from_u64(6);
    // 09:00-18:00 in São Paulo (UTC-3); wall() is 12:00 UTC = 09:00 local: open.
    let w = SendWindow {
        start: NaiveTime::from_hms_opt(10, 0, 0).unwrap(),
        end: NaiveTime::from_hms_opt(18, 0, 0).unwrap(),
        tz: chrono_tz::America::Sao_Paulo,
    };
    assert_eq!(w.wait(wall()), Duration::from_secs(3600), "09:00 local: opens in an hour");
    assert_eq!(w.wait("2026-11-23T14:00:00Z".parse().unwrap()), Duration::ZERO);
    assert_eq!(
        w.wait("2026-11-23T21:00:00Z".parse().unwrap()),
        Duration::from_secs(16 * 3600),
        "18:00 local: tomorrow 10:00"
    );
    let overnight = SendWindow {
        start: NaiveTime::from_hms_opt(22, 0, 0).unwrap(),
        end: NaiveTime::from_hms_opt(6, 0, 0).unwrap(),
        tz: chrono_tz::UTC,
    };
    assert_eq!(overnight.wait("2026-11-23T23:00:00Z".parse().unwrap()), Duration::ZERO);
    assert_eq!(overnight.wait("2026-11-23T03:00:00Z".parse().unwrap()), Duration::ZERO);
    assert_eq!(overnight.wait("2026-11-23T12:00:00Z".parse().unwrap()), Duration::from_secs(10 * 3600));

    let mut p = Pacer::new(Rules { window: Some(w), grace_min: Duration::ZERO, grace_max: Duration::ZERO, ..rules() });
    let t = drive(&mut p, 2, &mut rng).await;
    assert_eq!(t[0], Duration::from_secs(3600), "the queue waits for the window");
    assert_eq!(t[1] - t[0], Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_window_is_kept_by_a_queue_that_could_have_sent_long_ago() {
    let mut rng = StdRng::seed_from_u64(7);
    // Connected (grace over) an hour and a half before the window opens: nothing may go
    // before the opening, however long ago the other rules allowed it.
    let w = SendWindow {
        start: NaiveTime::from_hms_opt(13, 30, 0).unwrap(),
        end: NaiveTime::from_hms_opt(18, 0, 0).unwrap(),
        tz: chrono_tz::UTC,
    };
    let mut p = Pacer::new(Rules { window: Some(w), grace_min: Duration::ZERO, grace_max: Duration::ZERO, ..rules() });
    let start = Instant::now();
    p.connected(start, &mut rng);
    for minutes in [0u64, 30, 60, 80, 89] {
        let now = start + Duration::from_secs(minutes * 60);
        let wall_now = wall() + chrono::Duration::minutes(minutes as i64);
        let at = p.next_at(now, wall_now).unwrap();
        assert_eq!(at, start + Duration::from_secs(90 * 60), "{minutes} min after the connect");
    }
}
