//! Why a round of the relay or the fan-out failed: the loop logs it and tries again.

/// Any NATS client error, kept with its cause.
pub type NatsError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    #[error("postgres: {0}")]
    Db(#[from] sqlx::Error),
    #[error("nats: {0}")]
    Nats(#[source] NatsError),
    /// A NATS call that did not return within its deadline (a connection lost mid-call).
    #[error("{0} timed out")]
    Timeout(&'static str),
    /// A pull request the server lost (it restarted).
    #[error("the fetch stalled")]
    Stalled,
    /// The relay's position is past every transaction of this database: it was restored
    /// from a logical dump (docs/operations.md says how to reset it).
    #[error("the outbox relay's position is ahead of this database's transactions (a logical restore?): reset it")]
    PositionAhead,
}

impl RoundError {
    pub fn nats(e: impl Into<NatsError>) -> RoundError {
        RoundError::Nats(e.into())
    }
}
