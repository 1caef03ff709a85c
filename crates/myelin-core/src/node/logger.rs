//! A node's logger, as rclcpp's: each line goes to the console (through
//! `tracing`, myelin's log) and to `/rosout` as an `rcl_interfaces/msg/Log`,
//! where `ros2 topic echo /rosout`, rqt_console and bags see it.

use std::sync::{Arc, Weak};

use crate::publisher::Publisher;
use crate::qos::QoS;
use crate::rcl_interfaces::Log;
use crate::runtime::NodeInner;

use super::Node;

/// QoS of `/rosout`, as rclcpp's: transient local (a late `ros2 topic
/// echo` sees recent lines), the last 1000, each kept 10 s.
fn rosout_qos() -> QoS {
    QoS::keep_last(1000)
        .transient_local()
        .lifespan(std::time::Duration::from_secs(10))
}

/// A node's logger ([`Node::get_logger`]). Cheap to clone.
#[derive(Clone)]
pub struct Logger {
    node: Weak<NodeInner>,
    /// `namespace.node` (rclcpp's logger name: `/` becomes `.`, no
    /// leading dot).
    name: Arc<str>,
}

impl Logger {
    /// The logger's name (`robot.camera` for `/robot/camera`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Log at debug level (console only when `MYELIN_LOG` asks for debug;
    /// always on `/rosout`).
    #[track_caller]
    pub fn debug(&self, msg: impl std::fmt::Display) {
        self.log(Log::DEBUG, &msg.to_string(), std::panic::Location::caller());
    }

    /// Log at info level.
    #[track_caller]
    pub fn info(&self, msg: impl std::fmt::Display) {
        self.log(Log::INFO, &msg.to_string(), std::panic::Location::caller());
    }

    /// Log at warning level.
    #[track_caller]
    pub fn warn(&self, msg: impl std::fmt::Display) {
        self.log(Log::WARN, &msg.to_string(), std::panic::Location::caller());
    }

    /// Log at error level.
    #[track_caller]
    pub fn error(&self, msg: impl std::fmt::Display) {
        self.log(Log::ERROR, &msg.to_string(), std::panic::Location::caller());
    }

    /// Log at fatal level.
    #[track_caller]
    pub fn fatal(&self, msg: impl std::fmt::Display) {
        self.log(Log::FATAL, &msg.to_string(), std::panic::Location::caller());
    }

    fn log(&self, level: u8, msg: &str, at: &std::panic::Location<'_>) {
        let name = &*self.name;
        match level {
            Log::DEBUG => tracing::debug!(target: "rosout", "[{name}]: {msg}"),
            Log::INFO => tracing::info!(target: "rosout", "[{name}]: {msg}"),
            Log::WARN => tracing::warn!(target: "rosout", "[{name}]: {msg}"),
            _ => tracing::error!(target: "rosout", "[{name}]: {msg}"),
        }
        let Some(inner) = self.node.upgrade() else {
            return;
        };
        let Some(p) = rosout(&inner) else { return };
        let line = Log {
            stamp: crate::time::Clock::ros(inner.ctx.sim.clone()).now(),
            level,
            name: name.to_string(),
            msg: msg.to_string(),
            file: at.file().to_string(),
            function: String::new(),
            line: at.line(),
        };
        if let Err(e) = p.publish(line) {
            tracing::debug!("{name}: /rosout: {e}");
        }
    }
}

impl std::fmt::Debug for Logger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logger").field("name", &self.name).finish()
    }
}

/// The node's `/rosout` publisher, made with its first log line (a node
/// that never logs has none). It holds the node, so it is kept with the
/// node's parameter entities and goes with the node's last handle.
fn rosout(inner: &Arc<NodeInner>) -> Option<Arc<Publisher<Log>>> {
    let mut slot = inner.rosout.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = slot
        .as_ref()
        .and_then(|b| b.downcast_ref::<Arc<Publisher<Log>>>())
    {
        return Some(p.clone());
    }
    let node = Node {
        inner: inner.clone(),
        _user: None,
    };
    match node.create_publisher::<Log>("/rosout", rosout_qos()) {
        Ok(p) => {
            let p = Arc::new(p);
            *slot = Some(Box::new(p.clone()));
            Some(p)
        }
        Err(e) => {
            tracing::debug!("{}: no /rosout publisher: {e}", inner.fqn);
            None
        }
    }
}

impl Node {
    /// This node's logger: lines to the console and to `/rosout`, as
    /// rclcpp's `get_logger()`.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let ctx = myelin_core::Context::builder().handle_signals(false).build()?;
    /// let node = ctx.create_node_in("camera", "/robot")?;
    /// let log = node.get_logger();
    /// assert_eq!(log.name(), "robot.camera");
    /// log.info(format_args!("streaming at {} fps", 30));
    /// # Ok(()) }
    /// ```
    pub fn get_logger(&self) -> Logger {
        let name = self.inner.fqn.trim_start_matches('/').replace('/', ".");
        Logger {
            node: Arc::downgrade(&self.inner),
            name: name.into(),
        }
    }
}
