//! What the CLI test files share: the binary, and a background `myelin`
//! process stopped with Ctrl-C (SIGINT) when dropped.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `myelin` binary under test.
pub fn myelin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_myelin"))
}

/// A background process; dropping it sends SIGINT (its context shuts down
/// and it exits cleanly), then kills it if it has not exited within 10 s.
pub struct Background(pub Child);

impl Drop for Background {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `myelin router` on a free loopback port, and a session config file
/// pointing at it (multicast scouting off).
#[allow(dead_code)] // not every test file starts a router
pub fn router() -> (Background, std::path::PathBuf) {
    // A free port, then the router binds it: another test's session may
    // take it in between (its listener asks for any port), so a router
    // that could not listen is started again on another (CI saw it).
    let mut attempts = 0;
    let (child, endpoint, mut out) = loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let endpoint = format!("tcp/127.0.0.1:{port}");
        let mut child = myelin()
            .args(["router", "--listen", &endpoint])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        if line.contains("listening on") {
            break (child, endpoint, out);
        }
        let _ = child.kill();
        let _ = child.wait();
        attempts += 1;
        assert!(attempts < 5, "the router never listened: {line}");
    };
    // One file per router: tests of one binary run in parallel, each with
    // its own router.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cfg =
        std::env::temp_dir().join(format!("myelin_cli_zenoh_{}_{n}.json5", std::process::id()));
    std::fs::write(
        &cfg,
        format!(
            r#"{{ mode: "peer", connect: {{ endpoints: ["{endpoint}"] }}, listen: {{ endpoints: ["tcp/127.0.0.1:0"] }}, scouting: {{ multicast: {{ enabled: false }} }} }}"#
        ),
    )
    .unwrap();
    // Keep reading (and discarding) its output.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while std::io::BufRead::read_line(&mut out, &mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    });
    (Background(child), cfg)
}

/// The router endpoint a session config from [`router`] connects to.
#[allow(dead_code)] // not every test file starts a router
pub fn router_endpoint(cfg: &std::path::Path) -> String {
    std::fs::read_to_string(cfg)
        .unwrap()
        .split('"')
        .find(|s| s.starts_with("tcp/127.0.0.1:") && !s.ends_with(":0"))
        .unwrap()
        .to_string()
}
