//! What an instance used over the last 30 days: a chart of messages per day, drawn on
//! the server as SVG (no script, no library), and the totals.

use domain::usage::UsageOut;
use maud::{html, Markup};

use super::{layout, tabs, Tab};
use crate::session::Who;

/// The chart's size, in its own units (it scales to the page's width).
const W: f64 = 600.0;
const H: f64 = 160.0;

pub fn usage(who: (&Who, &str), id: &str, name: &str, u: &UsageOut) -> Markup {
    let t = &u.totals;
    layout(
        &format!("{name}: usage"),
        Some(who),
        html! {
            h1 { (name) }
            (tabs(who.0, id, Tab::Usage))
            h2 { "Messages per day, " (u.from) " to " (u.to) " (UTC)" }
            (chart(u))
            p.legend { span.key-sent { "■" } " sent  " span.key-received { "■" } " received" }
            div.scroll tabindex="0" {
                table {
                    caption { "Totals over these days" }
                    tbody {
                        tr { th scope="row" { "Messages queued" } td { (t.messages_queued) } }
                        tr { th scope="row" { "Messages sent" } td { (t.messages_sent) } }
                        tr { th scope="row" { "Messages failed" } td { (t.messages_failed) } }
                        tr { th scope="row" { "Messages expired" } td { (t.messages_expired) } }
                        tr { th scope="row" { "Messages received" } td { (t.messages_received) } }
                        tr { th scope="row" { "Media sent" } td { (bytes(t.media_bytes_sent)) } }
                        tr { th scope="row" { "Media received" } td { (bytes(t.media_bytes_received)) } }
                        tr { th scope="row" { "Number lookups" } td { (t.lookups_new) " new, " (t.lookups_cached) " cached" } }
                        tr { th scope="row" { "Webhook deliveries" } td { (t.deliveries_succeeded) " succeeded, " (t.deliveries_failed) " failed" } }
                        tr { th scope="row" { "Attendant replies" } td { (t.attendant_replies) " (" (t.attendant_tokens) " tokens)" } }
                    }
                }
            }
        },
    )
}

/// Sent and received per day as pairs of bars, each day with its numbers as a title.
fn chart(u: &UsageOut) -> Markup {
    let max =
        u.days.iter().map(|d| d.counts.messages_sent.max(d.counts.messages_received)).max().unwrap_or(0).max(1) as f64;
    let slot = W / u.days.len().max(1) as f64;
    let bar = (slot / 2.0 - 1.0).max(1.0);
    let height = |n: i64| (n as f64 / max) * (H - 20.0);
    let summary = format!(
        "{} messages sent and {} received from {} to {}; the busiest day had {}",
        u.totals.messages_sent, u.totals.messages_received, u.from, u.to, max as i64
    );
    html! {
        svg.chart viewBox={ "0 0 " (W) " " (H) } role="img" aria-label=(summary) preserveAspectRatio="none" {
            // SVG in HTML: an element without an end tag stays open, so each has one.
            line x1="0" y1=(H - 0.5) x2=(W) y2=(H - 0.5) stroke="#d0d7de" {}
            @for (i, d) in u.days.iter().enumerate() {
                @let x = i as f64 * slot;
                @let (s, r) = (height(d.counts.messages_sent), height(d.counts.messages_received));
                g {
                    title { (d.date) ": " (d.counts.messages_sent) " sent, " (d.counts.messages_received) " received" }
                    rect.sent x=(format!("{x:.1}")) y=(format!("{:.1}", H - s)) width=(format!("{bar:.1}")) height=(format!("{s:.1}")) {}
                    rect.received x=(format!("{:.1}", x + bar + 1.0)) y=(format!("{:.1}", H - r)) width=(format!("{bar:.1}")) height=(format!("{r:.1}")) {}
                }
            }
        }
    }
}

fn bytes(n: i64) -> String {
    match n {
        n if n >= 1 << 30 => format!("{:.1} GiB", n as f64 / (1u64 << 30) as f64),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::usage::UsageDay;
    use shared::db::usage::Counts;

    fn day(date: &str, sent: i64, received: i64) -> UsageDay {
        UsageDay {
            date: date.parse().unwrap(),
            counts: Counts { messages_sent: sent, messages_received: received, ..Counts::default() },
        }
    }

    #[test]
    fn bars_are_scaled_to_the_busiest_day_and_titled() {
        let u = UsageOut {
            from: "2026-11-01".parse().unwrap(),
            to: "2026-11-02".parse().unwrap(),
            days: vec![day("2026-11-01", 3, 0), day("2026-11-02", 6, 12)],
            totals: Counts { messages_sent: 9, messages_received: 12, ..Counts::default() },
        };
        let svg = chart(&u).into_string();
        // The busiest value (12 received) takes the whole drawable height (140); 6 half, 3 a quarter.
        assert!(svg.contains(r#"class="received" x="450.0" y="20.0" width="149.0" height="140.0"></rect>"#), "{svg}");
        assert!(svg.contains(r#"class="sent" x="300.0" y="90.0" width="149.0" height="70.0"></rect>"#), "{svg}");
        assert!(svg.contains(r#"class="sent" x="0.0" y="125.0" width="149.0" height="35.0"></rect>"#), "{svg}");
        assert!(svg.contains("<title>2026-11-02: 6 sent, 12 received</title>"), "{svg}");
        assert!(svg.contains("9 messages sent and 12 received"), "the chart's summary for screen readers");
        assert_eq!(bytes(1536), "1.5 KiB");
    }
}
