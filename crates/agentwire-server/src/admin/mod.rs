//! The admin listener: plain HTTP beside the protocol listeners, for load balancers,
//! orchestrators and Prometheus.
//!
//! | path | answer |
//! |---|---|
//! | `GET /healthz` | `200 ok` while the process runs (liveness) |
//! | `GET /readyz` | `200 ready` when every [`Readiness`] check passes (each listener bound, the relay's study-log folder writable, the cluster link up when there is one; evaluated at request time), else `503` naming the failing checks |
//! | `GET /metrics` | the [`Metrics`] as OpenMetrics text ([`CONTENT_TYPE`]) |
//! | any other path | `404` |
//! | any other method | `405` with `Allow: GET` |
//!
//! The HTTP side is [`http`]: one request per connection, bounded head, deadlines, capped
//! connections.

pub mod http;
mod readiness;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::task::JoinHandle;

pub use self::http::{HttpLimits, Reply, Response};
pub use self::readiness::{Readiness, ReadyFlag};
use crate::metrics::{Metrics, CONTENT_TYPE};

/// A running admin listener. Dropping it does not stop it: call
/// [`shutdown`](Self::shutdown).
#[derive(Debug)]
pub struct AdminServer {
    local_addr: SocketAddr,
    task: JoinHandle<()>,
}

impl AdminServer {
    /// The bound address (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://<addr>` of the listener.
    pub fn url(&self) -> String {
        format!("http://{}", self.local_addr)
    }

    /// Stops accepting and drops the connections in progress.
    pub async fn shutdown(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// Binds `addr` and serves `/healthz`, `/readyz` and `/metrics` (see the module docs).
/// Must be called inside a tokio runtime.
pub async fn serve(
    addr: impl ToSocketAddrs,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
) -> io::Result<AdminServer> {
    let listener = TcpListener::bind(addr).await?;
    let local_addr = listener.local_addr()?;
    let route = move |path: &str| -> Option<Reply> {
        let response = match path {
            "/healthz" => Response::text(200, "ok\n"),
            "/readyz" => match readiness.check() {
                Ok(()) => Response::text(200, "ready\n"),
                Err(failing) => Response::text(503, format!("not ready: {}\n", failing.join(", "))),
            },
            "/metrics" => Response::ok(CONTENT_TYPE, metrics.render()),
            _ => return None,
        };
        Some(Box::pin(std::future::ready(response)))
    };
    let task = tokio::spawn(http::serve(listener, HttpLimits::default(), route));
    Ok(AdminServer { local_addr, task })
}
