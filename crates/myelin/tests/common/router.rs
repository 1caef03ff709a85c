//! A zenoh router on a free loopback port, started in the test process (as
//! `myelin router` starts one), and a session configuration file that
//! points at it with multicast scouting off: nothing leaves the machine.

// Shared by several test binaries, each using a part of it.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;

/// The router and its session configuration file (both gone on drop).
pub struct Router {
    _session: myelin_zenoh::zenoh::Session,
    /// A peer session configuration that connects to the router.
    pub config: PathBuf,
    /// Where the router listens (`tcp/127.0.0.1:PORT`).
    pub endpoint: String,
    _dir: TempDir,
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Start a router; `tag` names its temporary directory.
pub fn router(tag: &str) -> Router {
    let port = free_port();
    let endpoint = format!("tcp/127.0.0.1:{port}");
    let cfg =
        myelin_zenoh::config::router_config(None, std::slice::from_ref(&endpoint), &[]).unwrap();
    let session = myelin_zenoh::config::open(cfg).unwrap();
    let dir = std::env::temp_dir().join(format!("myelin_net_{tag}_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("session.json5");
    let mut f = std::fs::File::create(&config).unwrap();
    write!(
        f,
        r#"{{
  mode: "peer",
  connect: {{ endpoints: ["{endpoint}"] }},
  listen: {{ endpoints: ["tcp/127.0.0.1:0"] }},
  scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: true }} }},
}}"#
    )
    .unwrap();
    Router {
        _session: session,
        config,
        endpoint,
        _dir: TempDir(dir),
    }
}
