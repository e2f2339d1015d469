//! Library code of the Chopsticks reference programs, shared by the examples
//! (`chopsticks_controller`, `chopsticks_agent`, `chopsticks_demo`) and the end-to-end tests.

pub mod agent_app;
pub mod controller_app;
pub mod player;
