//! Tables only the API uses.

pub mod number_checks;
