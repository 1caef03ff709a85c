//! zenoh session and router configurations.
//!
//! The default follows rmw_zenoh's, restricted to this host: a **peer**
//! session with multicast scouting **off**, listening on
//! `tcp/127.0.0.1:<any port>` and connecting to a router on
//! [`DEFAULT_ROUTER`] when one runs (the attempt is retried in the
//! background, so a process without a router keeps working on shared
//! memory). Gossip scouting is on, as in rmw_zenoh: peers that meet at a
//! router learn each other's (loopback) endpoints from it and then talk
//! directly (the core turns it off for a context that uses shared memory,
//! whose same-host peers need no zenoh link). Nothing leaves the host
//! unless a router is pointed at another.
//!
//! [`CONFIG_ENV`] (`MYELIN_ZENOH_CONFIG=FILE`) or an explicit file replaces
//! the default with any zenoh configuration, taken as written: zenoh's own
//! defaults fill what it leaves out, multicast scouting included, so a
//! deployment file should say `scouting: { multicast: { enabled: false } }`
//! unless it wants the LAN scouted.

use std::path::Path;

use zenoh::{Config, Session, Wait};

use crate::Error;

/// The router every process tries to reach by default (rmw_zenoh's port).
pub const DEFAULT_ROUTER: &str = "tcp/127.0.0.1:7447";

/// Whether something accepts TCP connections at [`DEFAULT_ROUTER`] within
/// `timeout` (a router, rmw_zenohd, or anything else on that port).
///
/// ```
/// use std::time::Duration;
/// // Either answer is possible; the probe never blocks past the timeout.
/// let _ = myelin_zenoh::config::default_router_listening(Duration::from_millis(50));
/// ```
pub fn default_router_listening(timeout: std::time::Duration) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 7447));
    std::net::TcpStream::connect_timeout(&addr, timeout).is_ok()
}

/// The environment variable naming a zenoh configuration file.
pub const CONFIG_ENV: &str = "MYELIN_ZENOH_CONFIG";

fn set(c: &mut Config, key: &str, value: &str) -> Result<(), Error> {
    c.insert_json5(key, value).map_err(|e| Error::Config {
        file: None,
        why: format!("setting {key} = {value}: {e}"),
    })
}

fn list(endpoints: &[String]) -> String {
    let quoted: Vec<String> = endpoints.iter().map(|e| format!("{e:?}")).collect();
    format!("[{}]", quoted.join(","))
}

/// How a session or router retries its `connect` endpoints: forever
/// (timeout -1, never exit on failure), in the background, backing off
/// from 250 ms to 1 s (rmw_zenoh: 1 s to 4 s; shorter here, so a
/// restarted router is found again within a second: an attempt on
/// loopback costs microseconds).
const RETRY_PERIODS: &str =
    "{ period_init_ms: 250, period_max_ms: 1000, period_increase_factor: 2 }";

/// The transmission queues of the data priorities, in batches (zenoh's
/// default is 2, its maximum 16), for sessions and routers alike. A
/// camera frame of 4.6 MB is 72 batches of 64 KiB: with 2 the
/// publishing thread waits for the link every 128 KiB, and at more than
/// the link carries a best-effort camera's `publish` stalled its driver
/// (120 frames at 30 Hz took 4.1 to 4.4 s to publish, not 4 s), and
/// 25 Hz fell behind on a 1 Gbit/s link; with 16 it hands 1 MiB at once
/// and both are gone (BENCHMARKS.md, "Camera frames across a 1 Gbit/s
/// link"). Batches are allocated when a queue
/// fills (zenoh's `lazy` mode), so an uncongested link costs nothing
/// more. The receive buffer (`rx/buffer_size`), which zenoh suggests
/// raising for large messages, stays at its default: its buffers are
/// allocated per link up front, and 16 MiB per link across a hundred
/// processes would be gigabytes.
const DATA_QUEUES: &str = "{ data_high: 16, data: 16, data_low: 16 }";

/// The largest configuration file read (zenoh's own files are a few KiB).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// At most this much of zenoh's error text is quoted (it can quote the
/// file).
const MAX_WHY: usize = 400;

/// Load a zenoh configuration file (JSON5 or YAML, by extension). The file
/// must be a regular file of at most [`MAX_CONFIG_BYTES`]: a device such
/// as `/dev/zero`, a pipe or a huge file is refused before anything is
/// read, and the error quotes at most a short excerpt of zenoh's answer.
pub fn from_file(path: &Path) -> Result<Config, Error> {
    let refuse = |why: String| Error::Config {
        file: Some(path.to_path_buf()),
        why,
    };
    let meta = std::fs::metadata(path).map_err(|e| refuse(e.to_string()))?;
    if !meta.is_file() {
        return Err(refuse(
            "not a regular file (a zenoh configuration is a JSON5 or YAML file)".into(),
        ));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(refuse(format!(
            "{} bytes; a zenoh configuration is at most {MAX_CONFIG_BYTES} bytes",
            meta.len()
        )));
    }
    Config::from_file(path).map_err(|e| refuse(excerpt(&e.to_string())))
}

/// `why`, cut to [`MAX_WHY`] bytes on a character boundary.
fn excerpt(why: &str) -> String {
    if why.len() <= MAX_WHY {
        return why.to_string();
    }
    let mut end = MAX_WHY;
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}... ({} bytes of error text cut)",
        &why[..end],
        why.len() - end
    )
}

/// The configuration of a myelin session: `file` if given, else the file
/// named by `MYELIN_ZENOH_CONFIG`, else the loopback default described in
/// the module docs.
pub fn session_config(file: Option<&Path>) -> Result<Config, Error> {
    if let Some(f) = file {
        return from_file(f);
    }
    if let Some(f) = std::env::var_os(CONFIG_ENV).filter(|f| !f.is_empty()) {
        return from_file(Path::new(&f));
    }
    // `scouting.delay`: zenoh waits this long in open() for scouting
    // replies (500 ms by default); with multicast off there are none.
    // `connect`: as rmw_zenoh's peers, never give up on the router: open()
    // returns at once and a background connector retries, backing off
    // from 250 ms to 1 s, until it reaches the router, and again whenever
    // the link to it closes (a router started after the process, a router
    // restart). zenoh only retries when the timeout is not zero.
    let text = format!(
        r#"{{
  mode: "peer",
  scouting: {{ multicast: {{ enabled: false }}, gossip: {{ enabled: true }}, delay: 0 }},
  listen: {{ endpoints: ["tcp/127.0.0.1:0"] }},
  connect: {{ endpoints: ["{DEFAULT_ROUTER}"], timeout_ms: -1, exit_on_failure: false, retry: {RETRY_PERIODS} }},
  transport: {{ link: {{ tx: {{ queue: {{ size: {DATA_QUEUES} }} }} }} }},
}}"#
    );
    Config::from_json5(&text).map_err(|e| Error::Config {
        file: None,
        why: e.to_string(),
    })
}

/// The configuration of a router: `file` if given (then `listen` and
/// `connect` are added to it when not empty), else a router listening on
/// `listen` (default [`DEFAULT_ROUTER`]) and connected to the routers in
/// `connect` (other hosts), multicast scouting off.
pub fn router_config(
    file: Option<&Path>,
    listen: &[String],
    connect: &[String],
) -> Result<Config, Error> {
    let mut c = match file {
        Some(f) => from_file(f)?,
        None => {
            let mut c = Config::default();
            set(&mut c, "scouting/multicast/enabled", "false")?;
            set(&mut c, "transport/link/tx/queue/size", &queue_sizes())?;
            c
        }
    };
    set(&mut c, "mode", "\"router\"")?;
    if !listen.is_empty() {
        set(&mut c, "listen/endpoints", &list(listen))?;
    } else if file.is_none() {
        set(&mut c, "listen/endpoints", &list(&[DEFAULT_ROUTER.into()]))?;
    }
    if !connect.is_empty() {
        set(&mut c, "connect/endpoints", &list(connect))?;
        set(&mut c, "connect/exit_on_failure", "false")?;
        set(&mut c, "connect/timeout_ms", "-1")?;
        set(&mut c, "connect/retry", RETRY_PERIODS)?;
    }
    Ok(c)
}

/// zenoh's queue sizes with [`DATA_QUEUES`] in place of the data ones.
fn queue_sizes() -> String {
    let q = DATA_QUEUES.trim_start_matches('{').trim_end_matches('}');
    format!(
        "{{ control: 2, real_time: 2, interactive_high: 2, interactive_low: 2, {q}, background: 2 }}"
    )
}

/// Open a session (or a router) with `config`.
pub fn open(config: Config) -> Result<Session, Error> {
    zenoh::open(config)
        .wait()
        .map_err(|e| Error::Open(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_and_routers_queue_16_batches_per_data_priority() {
        let session = session_config(None).unwrap();
        let router = router_config(None, &[], &[]).unwrap();
        for c in [session, router] {
            for p in ["data_high", "data", "data_low"] {
                let key = format!("transport/link/tx/queue/size/{p}");
                assert_eq!(c.get_json(&key).unwrap(), "16", "{key}");
            }
            let key = "transport/link/tx/queue/size/control";
            assert_eq!(c.get_json(key).unwrap(), "2", "{key}");
        }
    }

    #[test]
    fn the_default_stays_on_loopback_and_retries_its_router_forever() {
        let c = session_config(None).unwrap();
        assert_eq!(c.get_json("scouting/multicast/enabled").unwrap(), "false");
        assert_eq!(c.get_json("scouting/delay").unwrap(), "0");
        assert_eq!(c.get_json("connect/timeout_ms").unwrap(), "-1");
        assert_eq!(c.get_json("connect/exit_on_failure").unwrap(), "false");
        assert!(
            c.get_json("listen/endpoints")
                .unwrap()
                .contains("127.0.0.1")
        );
        assert!(
            c.get_json("connect/endpoints")
                .unwrap()
                .contains(DEFAULT_ROUTER)
        );
        let r = router_config(None, &[], &[]).unwrap();
        assert_eq!(r.get_json("mode").unwrap(), "\"router\"");
        assert_eq!(r.get_json("scouting/multicast/enabled").unwrap(), "false");
        assert!(
            r.get_json("listen/endpoints")
                .unwrap()
                .contains("127.0.0.1:7447")
        );
        let r = router_config(
            None,
            &["tcp/127.0.0.1:1".into()],
            &["tcp/127.0.0.1:2".into()],
        )
        .unwrap();
        assert!(
            r.get_json("connect/endpoints")
                .unwrap()
                .contains("127.0.0.1:2")
        );
        assert_eq!(r.get_json("connect/timeout_ms").unwrap(), "-1");
        assert!(
            r.get_json("listen/endpoints")
                .unwrap()
                .contains("127.0.0.1:1")
        );
        assert!(from_file(Path::new("/nonexistent.json5")).is_err());
    }

    #[test]
    fn a_device_or_a_huge_file_is_refused_before_it_is_read() {
        // /dev/zero would be read until memory runs out.
        let e = from_file(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let dir = std::env::temp_dir().join(format!("myelin_cfg_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.json5");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_CONFIG_BYTES + 1).unwrap();
        let e = from_file(&big).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{} bytes", MAX_CONFIG_BYTES + 1)),
            "{e}"
        );
        // A broken file just under the limit: the error quotes an excerpt.
        let junk = dir.join("junk.json5");
        std::fs::write(&junk, "{ mode: \"".to_string() + &"x".repeat(900_000)).unwrap();
        let e = from_file(&junk).unwrap_err().to_string();
        assert!(e.len() < 2 * MAX_WHY + 200, "error of {} bytes", e.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
