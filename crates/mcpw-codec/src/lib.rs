//! Sans-IO MCPW codec (work in progress on this branch).

pub mod crdt;
pub mod orchestrator;
