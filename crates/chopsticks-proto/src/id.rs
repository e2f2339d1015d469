//! Ids that name agents in events and key the controller's maps.

agentwire_core::string_id! {
    /// An agent's id (`agentId` on the wire): keys the controller's registry and names the
    /// agent in every [`ControllerEvent`](crate::ControllerEvent). Cloning it (into an event,
    /// a pending request, a session) shares the text, never copies it.
    pub struct AgentId [serde];
}
