//! What the CLI test files share: the binary, and a background `myelin`
//! process stopped with Ctrl-C (SIGINT) when dropped.

use std::process::{Child, Command};
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
