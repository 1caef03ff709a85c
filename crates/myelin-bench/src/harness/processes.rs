//! The other processes of multi-process runs: helper processes (this
//! executable started again with an environment variable naming its role:
//! a pong, a relay stage, an iceoryx2 pong, a topology process) and their
//! domains. The `myelin` binary checks the variables before parsing
//! arguments; a test binary runs only the role's test
//! (`<role> --exact --nocapture`).

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use myelin::Context;

use super::BenchError;

/// A domain for one run (200..=229), so concurrent runs and user graphs
/// on the usual domains are not disturbed.
pub(crate) fn domain(salt: u32) -> u32 {
    200 + (std::process::id().wrapping_add(salt) % 30)
}

/// A context on `domain` that must use shared memory.
pub(crate) fn shm_context(domain: u32, scenario: &'static str) -> Result<Context, BenchError> {
    Context::builder()
        .domain_id(domain)
        .handle_signals(false)
        .shared_memory(true)
        .build()
        .map_err(|e| BenchError::setup(scenario, e))
}

/// If `env` is set, this process is that helper: run `role` with the
/// variable's value, report a failure on stdout (the parent reads it) and
/// stderr, and exit. Returns only when `env` is not set.
pub(crate) fn run_role<E: std::fmt::Display>(
    env: &str,
    name: &str,
    role: impl FnOnce(&str) -> Result<(), E>,
) {
    let Ok(spec) = std::env::var(env) else {
        return;
    };
    // A helper's warnings reach the benchmark's stderr, as its parent's do.
    myelin::init_logging();
    let code = match role(&spec) {
        Ok(()) => 0,
        Err(e) => {
            println!("{name} error: {e}");
            eprintln!("{name}: {e}");
            1
        }
    };
    std::process::exit(code);
}

/// A running helper process. Dropping it closes its stdin (its signal to
/// stop), waits up to 5 s, then kills it.
pub(crate) struct Helper {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Helper {
    /// Start this executable as the helper `role_test` with `env=spec`.
    pub(crate) fn spawn(role_test: &str, env: &str, spec: String) -> std::io::Result<Helper> {
        let mut child = Command::new(std::env::current_exe()?)
            .args([role_test, "--exact", "--nocapture"])
            .env(env, spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let out = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Helper { child, out })
    }

    /// Start `cmd` (already naming this executable, perhaps through a
    /// wrapper such as the test bed's, with the role's environment) as a
    /// helper.
    #[cfg(feature = "zenoh")]
    pub(crate) fn from_command(mut cmd: Command) -> std::io::Result<Helper> {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let out = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Helper { child, out })
    }

    /// Read the helper's output up to a line containing `what`; if it exits
    /// first, the error quotes what it said went wrong.
    pub(crate) fn expect(&mut self, what: &str) -> Result<(), String> {
        self.line_with(what).map(drop)
    }

    /// Close the helper's stdin (its signal to finish) and read its output
    /// up to the line containing `what`, which is returned (without its
    /// line end).
    pub(crate) fn finish(&mut self, what: &str) -> Result<String, String> {
        drop(self.child.stdin.take());
        self.line_with(what)
    }

    fn line_with(&mut self, what: &str) -> Result<String, String> {
        let mut line = String::new();
        let mut said = String::new();
        loop {
            line.clear();
            match self.out.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    return Err(format!(
                        "the helper process exited before {what:?}: {}",
                        said.trim()
                    ));
                }
                Ok(_) if line.contains(what) => return Ok(line.trim_end().to_string()),
                Ok(_) if line.contains("error") => said.push_str(&line),
                Ok(_) => {}
            }
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
