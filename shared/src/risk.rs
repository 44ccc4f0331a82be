//! Ban risk: an instance's signals, read from Postgres over sliding windows, and the score
//! from 0 to 100 they give, with each signal's contribution and a recommendation in
//! words. Pure: `db::risk` reads the signals, this weighs them (unit-tested on hand-made
//! sets), and docs/ban-risk.md documents the formula.

use serde::Serialize;

/// What the risk is read from. Ratios are 0-1; counts are over the window in the name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Signals {
    /// Sends the network answered or finished in the last hour and 24 hours (sent or failed).
    pub sends_1h: i64,
    pub sends_24h: i64,
    /// Failed sends in 24 h, for any reason but expiry, and those to numbers without an account.
    pub failed_24h: i64,
    pub invalid_numbers_24h: i64,
    /// Sends refused by the network's rate limits or capping in 24 h.
    pub rate_limited_24h: i64,
    /// Sends in 24 h to chats that never wrote to this account before.
    pub first_contacts_24h: i64,
    /// Chats messaged in 7 days, and those of them that wrote to the account in that time.
    pub chats_messaged_7d: i64,
    pub chats_answered_7d: i64,
    /// Sends older than 30 minutes (within 24 h) never delivered, out of those sends.
    pub undelivered_24h: i64,
    pub deliverable_24h: i64,
    /// The most distinct chats one identical content went to in 24 h.
    pub max_chats_per_content_24h: i64,
    /// Sends per day over the 6 days before the last 24 h.
    pub daily_sends_before: f64,
    /// Days since the account was paired (none when never).
    pub age_days: Option<f64>,
    /// Temporary bans and forced logouts in 7 days.
    pub temp_bans_7d: i64,
    pub logouts_7d: i64,
}

/// One signal's part of the score.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Contribution {
    /// The signal's name, as in docs/ban-risk.md.
    pub signal: std::borrow::Cow<'static, str>,
    /// Its value (a ratio, a count, or a multiple).
    pub value: f64,
    /// Points added to the score.
    pub points: f64,
}

/// The levels, with the lowest score of each above `low`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Thresholds {
    pub elevated: f64,
    pub high: f64,
    pub critical: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { elevated: 25.0, high: 50.0, critical: 75.0 }
    }
}

/// `low`, `elevated`, `high` or `critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Low,
    Elevated,
    High,
    Critical,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Low => "low",
            Level::Elevated => "elevated",
            Level::High => "high",
            Level::Critical => "critical",
        }
    }
}

/// The score and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Assessment {
    /// 0-100.
    pub score: f64,
    pub level: Level,
    /// Every signal's part, largest first.
    pub contributions: Vec<Contribution>,
    /// What to do, in words.
    pub recommendation: String,
}

/// Sends below this in 24 h say too little for ratios to count.
const MIN_SENDS: i64 = 10;

fn ratio(part: i64, whole: i64) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        (part as f64 / whole as f64).clamp(0.0, 1.0)
    }
}

/// Weighs the signals (docs/ban-risk.md):
///
/// | signal | points |
/// |---|---|
/// | `invalid_number_ratio` (24 h) | 150 × ratio, at most 30 |
/// | `failure_ratio` (24 h, other reasons) | 40 × ratio, at most 10 |
/// | `rate_limited` (24 h) | 5 each, at most 20 |
/// | `first_contact_ratio` (24 h) | 25 × ratio |
/// | `unanswered_ratio` (7 d, chats) | 15 × ratio |
/// | `undelivered_ratio` (24 h, after 30 min) | 25 × ratio |
/// | `duplicate_content_chats` (24 h) | from 10 chats: 1 per 2 chats, at most 15 |
/// | `volume_multiple` (24 h against the 6 days before) | above 3×: 3 per multiple, at most 15 |
/// | `young_account` (paired under 7 days) | 10 × (1 - age / 7 days), when it sends 20+ a day |
/// | `temporary_bans` (7 d) | 35 each |
/// | `forced_logouts` (7 d) | 10 each, at most 20 |
///
/// Ratios count once the account sent at least 10 messages in 24 h (or messaged 10 chats
/// in 7 days); the score is capped at 100.
pub fn assess(s: &Signals, t: &Thresholds) -> Assessment {
    let enough = s.sends_24h >= MIN_SENDS;
    let invalid = ratio(s.invalid_numbers_24h, s.sends_24h);
    let other_failures = ratio(s.failed_24h - s.invalid_numbers_24h - s.rate_limited_24h, s.sends_24h);
    let first = ratio(s.first_contacts_24h, s.sends_24h);
    let unanswered = 1.0 - ratio(s.chats_answered_7d, s.chats_messaged_7d);
    let undelivered = ratio(s.undelivered_24h, s.deliverable_24h);
    let multiple = if s.daily_sends_before > 0.0 { s.sends_24h as f64 / s.daily_sends_before } else { 0.0 };
    let gate = |on: bool, p: f64| if on { p } else { 0.0 };
    let mut c = vec![
        Contribution {
            signal: "invalid_number_ratio".into(),
            value: invalid,
            points: gate(enough, (150.0 * invalid).min(30.0)),
        },
        Contribution {
            signal: "failure_ratio".into(),
            value: other_failures,
            points: gate(enough, (40.0 * other_failures).min(10.0)),
        },
        Contribution {
            signal: "rate_limited".into(),
            value: s.rate_limited_24h as f64,
            points: (5.0 * s.rate_limited_24h as f64).min(20.0),
        },
        Contribution { signal: "first_contact_ratio".into(), value: first, points: gate(enough, 25.0 * first) },
        Contribution {
            signal: "unanswered_ratio".into(),
            value: if s.chats_messaged_7d > 0 { unanswered } else { 0.0 },
            points: gate(s.chats_messaged_7d >= MIN_SENDS, 15.0 * unanswered),
        },
        Contribution {
            signal: "undelivered_ratio".into(),
            value: undelivered,
            points: gate(s.deliverable_24h >= MIN_SENDS, 25.0 * undelivered),
        },
        Contribution {
            signal: "duplicate_content_chats".into(),
            value: s.max_chats_per_content_24h as f64,
            points: if s.max_chats_per_content_24h >= 10 {
                ((s.max_chats_per_content_24h - 8) as f64 / 2.0).min(15.0)
            } else {
                0.0
            },
        },
        Contribution {
            signal: "volume_multiple".into(),
            value: multiple,
            points: gate(enough && multiple > 3.0, (3.0 * (multiple - 3.0)).min(15.0)),
        },
        Contribution {
            signal: "young_account".into(),
            value: s.age_days.unwrap_or(0.0),
            points: match s.age_days {
                Some(d) if d < 7.0 && s.sends_24h >= 20 => 10.0 * (1.0 - d / 7.0),
                _ => 0.0,
            },
        },
        Contribution {
            signal: "temporary_bans".into(),
            value: s.temp_bans_7d as f64,
            points: 35.0 * s.temp_bans_7d as f64,
        },
        Contribution {
            signal: "forced_logouts".into(),
            value: s.logouts_7d as f64,
            points: (10.0 * s.logouts_7d as f64).min(20.0),
        },
    ];
    for x in &mut c {
        x.points = (x.points * 10.0).round() / 10.0;
        x.value = (x.value * 1000.0).round() / 1000.0;
    }
    c.sort_by(|a, b| b.points.total_cmp(&a.points));
    let score = c.iter().map(|x| x.points).sum::<f64>().min(100.0);
    let score = (score * 10.0).round() / 10.0;
    let level = level(score, t);
    Assessment { recommendation: recommend(level, &c), score, level, contributions: c }
}

/// The pacing an instance gets at a risk level (docs/ban-risk.md): `elevated` multiplies
/// the interval by `slowdown` and divides the per-minute cap by it; `high` by its square;
/// `slowdown` 1 turns adaptive pacing off. Returns (min_interval_ms, max_per_minute).
pub fn effective_pacing(min_interval_ms: u32, max_per_minute: u32, level: Option<Level>, slowdown: f64) -> (u32, u32) {
    let f = match level {
        Some(Level::Elevated) => slowdown,
        Some(Level::High) | Some(Level::Critical) => slowdown * slowdown,
        _ => 1.0,
    }
    .max(1.0);
    let interval = (f64::from(min_interval_ms) * f).min(f64::from(u32::MAX)) as u32;
    let per_minute = ((f64::from(max_per_minute) / f).floor() as u32).max(1);
    (interval, per_minute)
}

/// The policies a deployment gives every instance (config `risk_*`), and what an
/// instance's own `risk_policy` overrides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Policy {
    /// The lowest score of each level above `low`.
    pub thresholds: Thresholds,
    /// Adaptive pacing's factor at `elevated` (squared at `high` and `critical`); 1 turns
    /// adaptive pacing off.
    pub slowdown: f64,
    /// Pause the queue at a critical risk or after a temporary ban.
    pub auto_pause: bool,
    /// At `high` and above, hold sends to chats that never wrote to the account; replies
    /// to chats that wrote in still go.
    pub hold_first_contacts: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { thresholds: Thresholds::default(), slowdown: 2.0, auto_pause: true, hold_first_contacts: true }
    }
}

/// An instance's own policies (`risk_policy` on the instance): each field present
/// replaces the deployment's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PolicyOverrides {
    /// The score (above 0, at most 100) from which the level is `elevated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 100))]
    pub elevated: Option<f64>,
    /// The score from which the level is `high` (above `elevated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 100))]
    pub high: Option<f64>,
    /// The score from which the level is `critical` (above `high`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 100))]
    pub critical: Option<f64>,
    /// Adaptive pacing's factor, 1-10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10))]
    pub slowdown: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_pause: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_first_contacts: Option<bool>,
}

impl Policy {
    /// This policy with an instance's overrides applied.
    pub fn with(&self, o: Option<&PolicyOverrides>) -> Policy {
        let Some(o) = o else { return *self };
        Policy {
            thresholds: Thresholds {
                elevated: o.elevated.unwrap_or(self.thresholds.elevated),
                high: o.high.unwrap_or(self.thresholds.high),
                critical: o.critical.unwrap_or(self.thresholds.critical),
            },
            slowdown: o.slowdown.unwrap_or(self.slowdown),
            auto_pause: o.auto_pause.unwrap_or(self.auto_pause),
            hold_first_contacts: o.hold_first_contacts.unwrap_or(self.hold_first_contacts),
        }
    }

    /// Why the policy cannot hold, naming the fields (none when it can).
    pub fn invalid(&self) -> Option<&'static str> {
        let t = &self.thresholds;
        if !(0.0 < t.elevated && t.elevated < t.high && t.high < t.critical && t.critical <= 100.0) {
            return Some("elevated < high < critical must hold, above 0 and at most 100");
        }
        if !(1.0..=10.0).contains(&self.slowdown) {
            return Some("slowdown must be between 1 and 10");
        }
        None
    }

    /// Whether `other` protects less than this policy in any way: a higher threshold, a
    /// smaller slowdown, or a policy turned off.
    pub fn looser(&self, other: &Policy) -> bool {
        let (a, b) = (&self.thresholds, &other.thresholds);
        b.elevated > a.elevated
            || b.high > a.high
            || b.critical > a.critical
            || other.slowdown < self.slowdown
            || (self.auto_pause && !other.auto_pause)
            || (self.hold_first_contacts && !other.hold_first_contacts)
    }

    /// Whether first-contact sends wait at `level`.
    pub fn holds_first_contacts(&self, level: Option<Level>) -> bool {
        self.hold_first_contacts && level.is_some_and(|l| l >= Level::High)
    }
}

/// A stored level.
pub fn parse_level(s: &str) -> Option<Level> {
    match s {
        "low" => Some(Level::Low),
        "elevated" => Some(Level::Elevated),
        "high" => Some(Level::High),
        "critical" => Some(Level::Critical),
        _ => None,
    }
}

/// The level of a score.
pub fn level(score: f64, t: &Thresholds) -> Level {
    if score >= t.critical {
        Level::Critical
    } else if score >= t.high {
        Level::High
    } else if score >= t.elevated {
        Level::Elevated
    } else {
        Level::Low
    }
}

fn recommend(level: Level, c: &[Contribution]) -> String {
    let top = c.first().filter(|x| x.points > 0.0).map(|x| match x.signal.as_ref() {
        "invalid_number_ratio" => "check numbers before sending (POST {inst}/numbers/check)",
        "failure_ratio" => "look at why sends fail",
        "rate_limited" => "send slower: the network is capping this account",
        "first_contact_ratio" => "send less to people who never wrote to this number",
        "unanswered_ratio" => "few recipients answer: send only to people who expect it",
        "undelivered_ratio" => "many sends stay undelivered: recipients may have blocked or reported the number",
        "duplicate_content_chats" => "vary the content: the same message to many chats looks like spam",
        "volume_multiple" => "raise volume gradually: it jumped against the account's history",
        "young_account" => "ramp up a new account slowly",
        "temporary_bans" => "the network paused this account: wait and send much less",
        _ => "the network logged this account out: check the phone",
    });
    let what = match level {
        Level::Low => "Risk is low.".to_string(),
        Level::Elevated => "Risk is elevated; pacing should slow down.".to_string(),
        Level::High => "Risk is high; hold first-contact sends.".to_string(),
        Level::Critical => "Risk is critical; pause the queue.".to_string(),
    };
    match top {
        Some(t) if level != Level::Low => format!("{what} Mainly: {t}."),
        _ => what,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversational() -> Signals {
        Signals {
            sends_1h: 5,
            sends_24h: 60,
            failed_24h: 1,
            first_contacts_24h: 3,
            chats_messaged_7d: 40,
            chats_answered_7d: 34,
            undelivered_24h: 1,
            deliverable_24h: 55,
            max_chats_per_content_24h: 2,
            daily_sends_before: 50.0,
            age_days: Some(200.0),
            ..Signals::default()
        }
    }

    #[test]
    fn a_healthy_conversation_is_low() {
        let a = assess(&conversational(), &Thresholds::default());
        assert!(a.score < 10.0, "{a:?}");
        assert_eq!(a.level, Level::Low);
        assert_eq!(a.recommendation, "Risk is low.");
    }

    #[test]
    fn a_spam_burst_is_high_or_critical_and_says_why() {
        let spam = Signals {
            sends_1h: 300,
            sends_24h: 400,
            failed_24h: 60,
            invalid_numbers_24h: 50,
            first_contacts_24h: 390,
            chats_messaged_7d: 400,
            chats_answered_7d: 4,
            undelivered_24h: 120,
            deliverable_24h: 300,
            max_chats_per_content_24h: 390,
            daily_sends_before: 20.0,
            age_days: Some(2.0),
            ..Signals::default()
        };
        let a = assess(&spam, &Thresholds::default());
        assert_eq!(a.score, 100.0);
        assert_eq!(a.level, Level::Critical);
        assert_eq!(a.contributions[0].signal, "first_contact_ratio");
        assert!(a.recommendation.starts_with("Risk is critical"), "{}", a.recommendation);
        // Each part as documented.
        let part = |n: &str| a.contributions.iter().find(|c| c.signal == n).unwrap().points;
        assert_eq!(part("invalid_number_ratio"), 18.8);
        assert_eq!(part("first_contact_ratio"), 24.4);
        assert_eq!(part("duplicate_content_chats"), 15.0);
        assert_eq!(part("volume_multiple"), 15.0);
        assert_eq!(part("young_account"), 7.1);
    }

    #[test]
    fn pacing_slows_with_the_level() {
        assert_eq!(effective_pacing(2000, 20, None, 2.0), (2000, 20));
        assert_eq!(effective_pacing(2000, 20, Some(Level::Low), 2.0), (2000, 20));
        assert_eq!(effective_pacing(2000, 20, Some(Level::Elevated), 2.0), (4000, 10));
        assert_eq!(effective_pacing(2000, 20, Some(Level::High), 2.0), (8000, 5));
        assert_eq!(effective_pacing(2000, 3, Some(Level::Critical), 2.0), (8000, 1), "never below 1 a minute");
        assert_eq!(effective_pacing(2000, 20, Some(Level::High), 1.0), (2000, 20), "1 turns it off");
        assert_eq!(parse_level("high"), Some(Level::High));
        assert_eq!(parse_level("x"), None);
    }

    #[test]
    fn network_signals_weigh_alone_and_ratios_need_enough_sends() {
        let banned = Signals { temp_bans_7d: 1, logouts_7d: 1, ..Signals::default() };
        let a = assess(&banned, &Thresholds::default());
        assert_eq!((a.score, a.level), (45.0, Level::Elevated));
        let few = Signals { sends_24h: 3, invalid_numbers_24h: 3, failed_24h: 3, ..Signals::default() };
        assert_eq!(assess(&few, &Thresholds::default()).score, 0.0, "3 sends say too little");
        let strict = Thresholds { elevated: 5.0, high: 10.0, critical: 40.0 };
        assert_eq!(assess(&banned, &strict).level, Level::Critical, "thresholds are the deployment's");
        assert_eq!(level(0.0, &Thresholds::default()), Level::Low);
    }

    #[test]
    fn an_instance_overrides_the_deployment_field_by_field() {
        let deployment = Policy::default();
        assert_eq!(deployment.with(None), deployment);
        let o = PolicyOverrides { critical: Some(60.0), auto_pause: Some(false), ..PolicyOverrides::default() };
        let p = deployment.with(Some(&o));
        assert_eq!(p.thresholds, Thresholds { elevated: 25.0, high: 50.0, critical: 60.0 });
        assert!(!p.auto_pause && p.hold_first_contacts && p.slowdown == 2.0);
        assert_eq!(p.invalid(), None);
        assert!(deployment.looser(&p), "auto_pause off is looser");
        let stricter = deployment.with(Some(&PolicyOverrides {
            elevated: Some(10.0),
            slowdown: Some(3.0),
            ..PolicyOverrides::default()
        }));
        assert!(!deployment.looser(&stricter));
        let raised = deployment.with(Some(&PolicyOverrides { high: Some(70.0), ..PolicyOverrides::default() }));
        assert!(deployment.looser(&raised), "a higher threshold is looser");
        let crossed = deployment.with(Some(&PolicyOverrides { high: Some(80.0), ..PolicyOverrides::default() }));
        assert!(crossed.invalid().is_some(), "high above critical");
        let slow = deployment.with(Some(&PolicyOverrides { slowdown: Some(11.0), ..PolicyOverrides::default() }));
        assert!(slow.invalid().is_some());
        assert!(serde_json::from_str::<PolicyOverrides>(r#"{"critcal": 60}"#).is_err(), "unknown fields refused");
    }

    #[test]
    fn first_contacts_wait_from_high_when_the_policy_says() {
        let p = Policy::default();
        assert!(!p.holds_first_contacts(None));
        assert!(!p.holds_first_contacts(Some(Level::Elevated)));
        assert!(p.holds_first_contacts(Some(Level::High)));
        assert!(p.holds_first_contacts(Some(Level::Critical)));
        let off = Policy { hold_first_contacts: false, ..p };
        assert!(!off.holds_first_contacts(Some(Level::High)));
    }
}
