//! Each enabled protocol's app, built from its configuration section and mounted on its
//! listener's route, with its events logged and counted in the metrics.

use std::sync::Arc;

use crate::admin::Readiness;
use crate::bus::server_app::BusApp;
use crate::chopsticks::controller_app::ControllerApp;
use crate::config::{Config, Protocol};
use crate::endpoint::Mount;
use crate::llmrtc::providers::Providers;
use crate::llmrtc::server_app::LlmrtcApp;
use crate::mcpw::server_app::ServerApp;
use crate::metrics::Metrics;
use crate::relay::server_app::RelayApp;
use crate::security::keys::KeySource;

use super::error::StartError;

/// The running apps, one per enabled protocol.
#[derive(Default)]
pub(super) struct Apps {
    pub(super) bus: Option<BusApp>,
    pub(super) chopsticks: Option<ControllerApp>,
    pub(super) mcpw: Option<ServerApp>,
    pub(super) llmrtc: Option<LlmrtcApp>,
    pub(super) relay: Option<RelayApp>,
}

impl Apps {
    /// The URL of `protocol`'s app, if it runs.
    pub(super) fn url(&self, protocol: Protocol) -> Option<String> {
        match protocol {
            Protocol::Bus => self.bus.as_ref().map(BusApp::url),
            Protocol::Chopsticks => self.chopsticks.as_ref().map(ControllerApp::url),
            Protocol::Mcpw => self.mcpw.as_ref().map(ServerApp::url),
            Protocol::Llmrtc => self.llmrtc.as_ref().map(LlmrtcApp::url),
            Protocol::Relay => self.relay.as_ref().map(RelayApp::url),
        }
    }

    /// Waits until every app's tasks have ended, once its driver has stopped (the relay's
    /// sync worker last: every queued `fsync` has run and every study log is closed).
    pub(super) async fn finish(self) {
        if let Some(app) = self.bus {
            app.server.shutdown().await;
            let _ = app.events_task.await;
        }
        if let Some(app) = self.chopsticks {
            app.server.shutdown().await;
            let _ = app.events_task.await;
        }
        if let Some(app) = self.mcpw {
            app.shutdown().await;
        }
        if let Some(app) = self.llmrtc {
            app.shutdown().await;
        }
        if let Some(app) = self.relay {
            app.shutdown().await;
        }
    }
}

/// What every protocol's mount needs besides its route.
pub(super) struct Context<'a> {
    pub(super) config: &'a Config,
    pub(super) metrics: &'a Arc<Metrics>,
    pub(super) readiness: &'a Readiness,
}

/// Builds `protocol`'s app from its section and mounts it `at` its route.
pub(super) async fn mount(
    protocol: Protocol,
    at: Mount<'_>,
    cx: &Context<'_>,
    apps: &mut Apps,
) -> Result<(), StartError> {
    let listener = cx.config.endpoint(protocol).listener.to_owned();
    let path = at.path.to_owned();
    let failed = |source: std::io::Error| StartError::Mount {
        protocol,
        listener: listener.clone(),
        path: path.clone(),
        source,
    };
    let metrics = Arc::clone(cx.metrics);
    match protocol {
        Protocol::Bus => {
            use crate::bus::server_app::{self as app, EventLog};
            let section = &cx.config.bus;
            let bus = section.bus_config();
            let transport = section
                .transport
                .apply(app::server_config(&bus).with_endpoint("jsonrpc-bus", at.path));
            let mut log = EventLog::new();
            let on_event = move |ev: &_| {
                metrics.observe_bus(ev);
                log.log(ev);
            };
            let a = app::mount_with(at, bus, transport, on_event)
                .await
                .map_err(failed)?;
            cx.metrics.register_handle(protocol, a.handle.clone());
            apps.bus = Some(a);
        }
        Protocol::Chopsticks => {
            use crate::chopsticks::controller_app::{self as app, event_json};
            let section = &cx.config.chopsticks;
            let transport = section
                .transport
                .apply(app::server_config().with_endpoint("chopsticks controller", at.path));
            let on_event = move |ev: &_| {
                metrics.observe_chopsticks(ev);
                if tracing::enabled!(target: "agentwire::chopsticks", tracing::Level::INFO) {
                    if let Some(line) = event_json(ev) {
                        tracing::info!(target: "agentwire::chopsticks", "{line}");
                    }
                }
            };
            let secrets = KeySource::runner_secrets(section)
                .load()
                .map_err(|source| StartError::Keys { protocol, source })?;
            let controller = section.controller_config().with_runner_secrets(secrets);
            let a = app::mount_with(at, controller, transport, on_event)
                .await
                .map_err(failed)?
                .with_actor(section.actor());
            cx.metrics.register_handle(protocol, a.handle.clone());
            apps.chopsticks = Some(a);
        }
        Protocol::Mcpw => {
            use crate::mcpw::server_app as app;
            use agentwire::mcpw::orchestrator::OrchestratorEvent;
            let section = &cx.config.mcpw;
            let transport = section
                .transport
                .apply(app::server_config().with_endpoint("mcpw", at.path));
            let on_event = move |ev: &OrchestratorEvent| {
                metrics.observe_mcpw(ev);
                match ev {
                    OrchestratorEvent::ProtocolViolation { .. } => {
                        tracing::warn!(target: "agentwire::mcpw", "{}", app::describe(ev));
                    }
                    _ => tracing::info!(target: "agentwire::mcpw", "{}", app::describe(ev)),
                }
            };
            let api_keys = KeySource::api_keys(section)
                .load()
                .map_err(|source| StartError::Keys { protocol, source })?;
            let a = app::mount_with(
                at,
                section.orchestrator_config(),
                section.upgrade_config().with_api_keys(api_keys),
                transport,
                on_event,
            )
            .await
            .map_err(failed)?;
            cx.metrics.register_handle(protocol, a.handle.clone());
            apps.mcpw = Some(a);
        }
        Protocol::Llmrtc => {
            use crate::llmrtc::server_app as app;
            let section = &cx.config.llmrtc;
            let config = section.server_config()?;
            let providers = Providers::stand_ins(section.stt()?);
            let transport = section
                .transport
                .apply(app::transport_config(&config).with_endpoint("llmrtc", at.path));
            let on_event = move |ev: &_| {
                metrics.observe_llmrtc(ev);
                if tracing::enabled!(target: "agentwire::llmrtc", tracing::Level::INFO) {
                    if let Some(line) = crate::llmrtc::server_log::describe(ev) {
                        tracing::info!(target: "agentwire::llmrtc", "{line}");
                    }
                }
            };
            let a = app::mount_with(
                at,
                config,
                section.webrtc_options(),
                providers,
                section.pacing(),
                transport,
                on_event,
            )
            .await
            .map_err(failed)?;
            cx.metrics.register_handle(protocol, a.handle.clone());
            apps.llmrtc = Some(a);
        }
        Protocol::Relay => {
            use crate::relay::server_app::{self as app, EventLog};
            let section = &cx.config.relay;
            std::fs::create_dir_all(&section.log_dir).map_err(|source| StartError::LogDir {
                path: section.log_dir.clone(),
                source,
            })?;
            cx.readiness
                .writable_dir("relay study-log folder", section.log_dir.clone());
            let config = section.relay_config();
            let transport = section.transport.apply(app::route_config(&config, at.path));
            let mut log = EventLog::new();
            let on_event = move |ev: &_| {
                metrics.observe_relay(ev);
                log.log(ev);
            };
            let a = app::mount_with(
                at,
                config,
                transport,
                section.log_dir.clone(),
                section.sync_policy(),
                on_event,
            )
            .await
            .map_err(failed)?;
            cx.metrics.register_handle(protocol, a.handle.clone());
            apps.relay = Some(a);
        }
    }
    Ok(())
}
