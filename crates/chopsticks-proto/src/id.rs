//! Ids that travel in events and key the controller's maps: agents, guilds, channels, users.

agentwire_core::string_id! {
    /// An agent's id (`agentId` on the wire): keys the controller's registry and names the
    /// agent in every [`ControllerEvent`](crate::ControllerEvent). Cloning it (into an event,
    /// a pending request, a session) shares the text, never copies it.
    pub struct AgentId [serde];
}

agentwire_core::string_id! {
    /// A Discord guild (server) id (`guildId` on the wire): what agents list, and the first
    /// part of a [`SessionKey`](crate::SessionKey).
    pub struct GuildId [serde];
}

agentwire_core::string_id! {
    /// A Discord channel id: the voice channel of a session (`voiceChannelId`) or its text
    /// channel (`textChannelId`).
    pub struct ChannelId [serde];
}

agentwire_core::string_id! {
    /// A Discord user id: a session's owner (`ownerUserId`).
    pub struct UserId [serde];
}
