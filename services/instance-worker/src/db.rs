//! The worker's own tables and columns: claiming and fenced writes on `instances`
//! (`sessions`), and the WhatsApp driver's key store (`wa_store`).

pub mod sessions;
pub mod wa_store;
