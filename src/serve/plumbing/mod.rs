//! What every request passes through: the guard on hosts, origins and content types (`guard`), the generation
//! slots and their queue (`engine`, `halt`), the graceful stop (`shutdown`), metrics (`metrics`, `histogram`) and
//! OpenAI's error object (`error`).

pub(crate) mod engine;
pub(crate) mod error;
pub(crate) mod guard;
pub(crate) mod halt;
pub(crate) mod histogram;
pub(crate) mod metrics;
pub(crate) mod shutdown;
