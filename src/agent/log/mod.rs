//! The run's record: the append-only audit log of events (`events`), the runs directory that holds one log per
//! run (`runs`), the summaries read back from logs (`summary`), and test-only fault injection into log writes
//! (`fault`).

pub mod events;
pub(crate) mod fault;
pub mod runs;
pub mod summary;
