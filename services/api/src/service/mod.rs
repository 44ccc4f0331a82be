//! The operations more than one route performs. Route modules parse, authorize and
//! shape answers; what they share lives here, so no route module calls another.

pub mod history;
pub mod instances;
pub mod pictures;
